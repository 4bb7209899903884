"""What counts as the bug when its exported reproducer runs: the recorded signature, and one rule that reads a verdict
against it.

A reproducer that exits 1 on any failure reports the wrong thing: on a GPU host whose torchvision was half
installed the old scripts printed ``REPRODUCED: [health] case error at start-up: ModuleNotFoundError: No module
named 'torchvision.transforms'`` and exited 1, without ever running the bug. So the script carries the bug's own
signature (``Expected``, from the case's recorded observation) and ``decide`` says reproduced only for a
divergence of the same oracle and symptom and, for an exception, the same type, place and message. Anything
else that is not a pass is "did not run". ``decide`` is pure and is copied into the script by ``inline.py``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

REPRODUCED, NOT_REPRODUCED, DID_NOT_RUN = 1, 0, 3  # the script's exit codes
EXIT_TEXT = "exit 1 = reproduced, 0 = not reproduced, 3 = did not run"

# "case error at step 0 (generate): ValueError: message (at vllm/x.py:12 in f)": place, exception type, message
ERROR_SUMMARY = re.compile(r"\b(?:error|crash|timeout) at (start-up|between steps|step \d+ \((\w+)\)): ([\w.]+): (.*?)(?: \(at [^()]*\))?$")
# With no recorded signature, still never a bug: a module this environment lacks (a half-installed torchvision).
BROKEN_ENVIRONMENT = ("error:ModuleNotFoundError", "error:ImportError")
ERROR_OUTCOMES = ("error", "crash", "timeout")  # verdict symptoms whose summary names a place and an exception
MESSAGE_CHARS = 80  # of the recorded message, as a pattern: enough to tell two errors of one type apart


@dataclass(frozen=True)
class Expected:
    """The bug's signature as a reproducer checks it."""

    signature: str  # as recorded: oracle:symptom:hash
    oracle: str
    symptom: str  # the verdict's symptom: nonfinite, error:RuntimeError, crash:SIGILL, first-request-differs...
    place: str = ""  # an exception's: start-up, between steps, or the step kind (generate, wake_up...)
    error_type: str = ""
    message: str = ""  # a regex an exception's summary must match (numbers masked)


@dataclass(frozen=True)
class Decision:
    exit_code: int
    line: str  # REPRODUCED / NOT REPRODUCED / DID NOT RUN, one line


def error_parts(summary: str) -> tuple[str, str, str] | None:
    """(place, exception type, message) of an error, crash or timeout verdict's summary; None for other verdicts."""
    m = ERROR_SUMMARY.search(summary)
    if m is None:
        return None
    return m.group(2) or m.group(1), m.group(3), m.group(4)


def message_pattern(message: str) -> str:
    """A regex for an exception message: its first MESSAGE_CHARS characters, whole words, numbers masked (shapes,
    line numbers and sizes differ between machines and releases; the words do not)."""
    text = message[:MESSAGE_CHARS]
    if len(message) > MESSAGE_CHARS and " " in text:
        text = text.rsplit(" ", 1)[0]
    return re.sub(r"\d+", r"\\d+", re.escape(text)).replace("\\ ", " ")


def expected_of(signature: str, summary: str, oracle: str = "") -> Expected:
    """The Expected of a recorded observation (``oracle``: its oracle field, which may hold a colon itself)."""
    oracle = oracle if oracle and signature.startswith(oracle + ":") else signature.partition(":")[0]
    symptom = signature[len(oracle) + 1:].rpartition(":")[0]
    outcome, _, kind = symptom.partition(":")
    parts = error_parts(summary) if outcome in ERROR_OUTCOMES else None
    if parts is None:
        return Expected(signature, oracle, symptom)
    place, error_type, message = parts
    return Expected(signature, oracle, symptom, place=place, error_type=kind or error_type,
                    message=message_pattern(message) if outcome == "error" else "")


def error_mismatch(expected: Expected, summary: str) -> str:
    """Why an error's summary is not the expected error (another place, exception type or message); '' when it is,
    or when ``expected`` names no error. The ledger matches a new finding to a bug by the same rule."""
    parts = error_parts(summary)
    place, error_type, _ = parts if parts is not None else ("", "", "")
    if expected.place and place != expected.place:
        return f"{expected.error_type} at {place or 'another place'}, the bug's is at {expected.place}"
    if expected.error_type and error_type != expected.error_type:
        return f"{error_type} where the bug raises {expected.error_type}"
    if expected.message and re.search(expected.message, summary) is None:
        return f"{error_type} with another message than the bug's (/{expected.message}/)"
    return ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def decide(expected: Expected | None, verdict) -> Decision:
    """Exit 1 only for the bug itself, 0 for a pass, 3 for everything else: a refusal, the harness's shortage, a
    different failure (a missing module, too little memory, another symptom, a hang that is not the bug's).
    ``expected`` None: no signature was recorded (a case that never diverged); any divergence then counts."""
    said = f"[{verdict.oracle}] {_one_line(verdict.summary)}"
    if verdict.status == "pass":
        return Decision(NOT_REPRODUCED, f"NOT REPRODUCED: {said}")
    if verdict.status != "divergence":
        return Decision(DID_NOT_RUN, f"DID NOT RUN: {said}")
    if expected is None:
        if verdict.symptom in BROKEN_ENVIRONMENT:
            return Decision(DID_NOT_RUN, f"DID NOT RUN: {said}")
        return Decision(REPRODUCED, f"REPRODUCED: {said}")
    wanted = f"{expected.oracle}:{expected.symptom}"
    got = f"{verdict.oracle}:{verdict.symptom}"
    if got != wanted:
        return Decision(DID_NOT_RUN, f"DID NOT RUN: a failure that is not the bug's ({got}, the bug is {wanted}): {said}")
    if why := error_mismatch(expected, verdict.summary):
        return Decision(DID_NOT_RUN, f"DID NOT RUN: {why}: {said}")
    return Decision(REPRODUCED, f"REPRODUCED: {said}")


def conclude(expected: dict | None, verdict) -> int:
    """What a reproducer prints at its end (the decision's line, the verdict's evidence, both signatures) and its exit
    code. ``expected``: the script's EXPECTED, the fields of an Expected."""
    decision = decide(Expected(**expected) if expected else None, verdict)
    print(decision.line)
    for line in verdict.evidence:
        print("  " + line.replace("\n", "\n  "))
    print(f"signature: {verdict.signature or 'none'} (the bug's: {expected['signature'] if expected else 'not recorded'})")
    return decision.exit_code
