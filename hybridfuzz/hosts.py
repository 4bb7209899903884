"""Pick an engine host by name: where cases run."""
from __future__ import annotations

from typing import Literal, get_args

HostName = Literal["forkserver", "subprocess", "server"]
HOSTS: tuple[str, ...] = get_args(HostName)


def make_host(name: HostName = "forkserver", workers: int = 1, timeout: float = 300.0, warm: bool = True):
    if name == "forkserver":
        from hybridfuzz.engines.forkserver import ForkServer

        return ForkServer(workers=workers, timeout=timeout, warm=warm)
    if name == "subprocess":
        from hybridfuzz.engines.subprocess_host import SubprocessHost

        return SubprocessHost(timeout=timeout)
    if name == "server":
        from hybridfuzz.engines.server import ServerHost

        return ServerHost(timeout=timeout, workers=workers)
    raise ValueError(f"unknown host {name!r} (known: {', '.join(HOSTS)})")
