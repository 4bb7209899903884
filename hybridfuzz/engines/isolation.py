"""Shared by the process hosts: turning a dead or silent child into Traces.

An engine child streams its progress (engines/offline.py ``run_session`` events) as JSON
lines to a progress file and writes its Traces to a result file at the end. When it
dies or hangs, the progress file says how far it got: the cases it finished keep
their Traces, and the case it was in gets the steps that did run plus the step it
hung or died in, named in the error.
"""
from __future__ import annotations

import json
import os
import signal

from hybridfuzz.engines.base import name_the_kernel
from hybridfuzz.failures import device_fault_line
from hybridfuzz.trace import ErrorInfo, StepResult, Trace


def tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class ProgressWriter:
    """The child's side: one JSON line per event, flushed, so a kill -9 loses nothing written."""

    def __init__(self, path: str):
        self._f = open(path, "a", encoding="utf-8")

    def __call__(self, event: dict) -> None:
        self._f.write(json.dumps(event) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def write_result(path: str, traces: list[Trace]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump([t.to_dict() for t in traces], f)
    os.replace(tmp, path)


def _events(progress_path: str) -> list[dict]:
    out = []
    try:
        with open(progress_path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    break  # a line cut short by the kill
    except OSError:
        pass
    return out


def _death(status: int | None) -> tuple[str, ErrorInfo]:
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = "killed (out of memory?)" if sig == signal.SIGKILL else "died"
        return "crash", ErrorInfo(name, f"engine process {why} by signal {name}")
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else status
    return "crash", ErrorInfo("ExitCode", f"engine process exited with code {code} and no result")


def rebuild(events: list[dict], outcome: str, error: ErrorInfo) -> list[Trace]:
    """Traces from a dead child's progress events: finished cases whole, the last one cut at its step."""
    traces: list[Trace] = []
    current: Trace | None = None
    starting: Trace | None = None  # where the engine was being started: environment and settings
    hung: tuple[int, str] | None = None
    for e in events:
        kind = e.get("event")
        if kind == "starting":
            starting = Trace.from_dict(e["trace"])
        elif kind == "started":
            current = Trace.from_dict(e["trace"])
            if current.outcome != "ok":  # it did not start: that Trace is complete
                return [current]
        elif kind == "case_begin":
            if e["case"] > 0:
                base = traces[-1] if traces else current
                current = Trace(env=base.env if base else {}, engine_settings=dict(base.engine_settings) if base else {},
                                warm_cases=e["case"], prelude=list(e.get("prelude", [])))
            hung = None
        elif kind == "step_begin":
            hung = (e["step"], e["kind"])
        elif kind == "step_end" and current is not None:
            current.steps.append(Trace.from_dict({"outcome": "ok", "steps": [e["result"]]}).steps[0])
            hung = None
        elif kind == "case_end":
            traces.append(Trace.from_dict(e["trace"]))
            current = None
    if current is None:  # died between cases, or before the engine started
        if traces:
            return traces
        current = Trace(env=starting.env, engine_settings=dict(starting.engine_settings)) if starting else Trace()
        where = "start-up"
    elif hung is not None:
        where = f"step {hung[0]} ({hung[1]})"
        current.steps.append(StepResult(index=hung[0], kind=hung[1], error=ErrorInfo(error.type, f"{error.message} in {where}", where)))
    else:
        where = "between steps"
    current.outcome = outcome
    current.error = ErrorInfo(error.type, f"{error.message} ({where})", error.where)
    traces.append(current)
    return traces


def host_load() -> str:
    """The host's load per core when a run timed out: a loaded host starts engines slowly (executor.replay)."""
    try:
        return f"host load {os.getloadavg()[0] / (os.cpu_count() or 1):.1f} per core"
    except OSError:
        return "host load unknown"


def collect(result_path: str, log_path: str, status: int | None, timed_out: bool, timeout: float, wall: float,
            progress_path: str | None = None) -> list[Trace]:
    """The child's own Traces if it wrote them, else what its progress file shows, ended by the crash or hang."""
    traces: list[Trace] | None = None
    if not timed_out:
        try:
            with open(result_path) as f:
                data = json.load(f)
            traces = [Trace.from_dict(d) for d in (data if isinstance(data, list) else [data])]
        except (OSError, ValueError):
            traces = None
    if traces is None:
        if timed_out:
            outcome, error = "timeout", ErrorInfo("Timeout", f"no progress within {timeout:g} s; engine killed; {host_load()}")
        else:
            outcome, error = _death(status)
        traces = rebuild(_events(progress_path) if progress_path else [], outcome, error)
        log = tail(log_path)
        # a death by signal left no exception: the device fault behind it (failures.py DEVICE_FAULT) is in the log,
        # above the C++ stack that fills its last lines
        fault = device_fault_line(tail(log_path, 60000)) if not timed_out else ""
        for t in traces:
            if t.outcome != "ok":
                t.log_tail = log
                if fault and t.error is not None:
                    t.error.message += f"; the log says: {fault}"
    else:
        from hybridfuzz.engines.logs import is_wrapper, unwrap

        if any(is_wrapper(t.error) for t in traces):  # the root cause is in the worker's traceback, in the log
            log = tail(log_path, 60000)
            for t in traces:
                unwrap(t, log)
    if not timed_out:
        name_the_kernel(traces, lambda: tail(log_path, 200000))
    traces[-1].timings["wall_s"] = wall
    return traces


class SequentialHost:
    """Hosts that run one case at a time and hold nothing between cases."""

    def run(self, case, timeout: float | None = None) -> Trace:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_many(self, cases, timeout: float | None = None) -> list[Trace]:
        return [self.run(c, timeout) for c in cases]

    def run_sessions(self, sessions, timeout: float | None = None, abandon: dict[int, int] | None = None) -> list[list[Trace]]:
        """No persistent mode here: every case of every session on a fresh engine, in one ``run_many``
        (a host that runs several engines at once overrides only that). ``abandon`` is not honoured: every case runs."""
        flat = self.run_many([c for s in sessions for c in s], timeout)
        out, i = [], 0
        for s in sessions:
            out.append(flat[i:i + len(s)])
            i += len(s)
        return out

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
