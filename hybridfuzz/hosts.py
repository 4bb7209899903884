"""Pick an engine host by name: where cases run."""
from __future__ import annotations

from typing import Literal, get_args

HostName = Literal["forkserver", "subprocess", "server"]
HOSTS: tuple[str, ...] = get_args(HostName)
# Hosts that keep an engine warm across a session's cases (persistent mode). The others start an engine per
# case anyway, so a session would only make its cases share one configuration: they run one case per session.
PERSISTENT: frozenset[str] = frozenset({"forkserver"})


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
