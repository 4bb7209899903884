"""At most N background shrinks at once on one host, whichever workers' findings they are.

The GPU plan (``capacity.plan``) leaves spare engine slots for shrinking, but each worker's
shrinker used to take its full parallelism as if the spares were its own. In the H200 campaign of
2026-12-01 (vLLM 0.26.0, results/2026-12-01-h200-vllm0.26.0-default-campaigns/) five findings were open at once, the
host's load rose from 1.3 to 3.1 per core, and generation fell from about 56 to 24 cases a minute.

A slot is an ``flock``-ed file under the campaign directory, so a worker killed mid-shrink frees
its slot with its process, and threads of one process exclude each other as processes do.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator


class ShrinkSlots:
    def __init__(self, directory: str, slots: int):
        self.directory = directory
        self.slots = max(1, slots)
        os.makedirs(directory, exist_ok=True)

    @contextlib.contextmanager
    def hold(self, deadline: float = float("inf"), poll_s: float = 1.0) -> Iterator[int | None]:
        """Wait for a free slot and hold it; past ``deadline``, go on without one (None): by then a
        shrink has no budget left and only replays its finding once."""
        while True:
            for i in range(self.slots):
                fd = os.open(os.path.join(self.directory, f"{i}.lock"), os.O_CREAT | os.O_RDWR, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                try:
                    yield i
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                return
            if time.time() >= deadline:
                yield None
                return
            time.sleep(poll_s)
