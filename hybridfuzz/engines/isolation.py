"""Shared by both hosts: turning a dead or silent child into a Trace."""
from __future__ import annotations

import json
import os
import signal

from hybridfuzz.trace import ErrorInfo, Trace


def tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def collect(result_path: str, log_path: str, status: int | None, timed_out: bool, timeout: float, wall: float) -> Trace:
    """The child's own Trace if it wrote one, else a crash/timeout Trace."""
    if timed_out:
        trace = Trace(outcome="timeout", error=ErrorInfo("Timeout", f"no result within {timeout:.0f} s; engine killed"))
    else:
        try:
            with open(result_path) as f:
                trace = Trace.from_dict(json.load(f))
        except (OSError, ValueError):
            if status is not None and os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
                why = "killed (out of memory?)" if sig == signal.SIGKILL else "died"
                trace = Trace(outcome="crash", error=ErrorInfo(name, f"engine process {why} by signal {name}"))
            else:
                code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else status
                trace = Trace(outcome="crash", error=ErrorInfo("ExitCode", f"engine process exited with code {code} and no result"))
    if trace.outcome != "ok":
        trace.log_tail = tail(log_path)
    trace.timings["wall_s"] = wall
    return trace


class SequentialHost:
    """Hosts that run one case at a time and hold nothing between cases."""

    def run(self, case, timeout: float | None = None) -> Trace:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_many(self, cases, timeout: float | None = None) -> list[Trace]:
        return [self.run(c, timeout) for c in cases]

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
