"""The Verdict: what an oracle concluded, with evidence a person can read."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

# What a run of a case concluded; "invalid" is only an exit code (the case did not load).
Status = Literal["pass", "divergence", "unsupported"]

# Exit codes of ``hybridfuzz replay`` by verdict status.
EXIT_CODES = {"pass": 0, "divergence": 1, "invalid": 2, "unsupported": 3}


# Joins a wrong output's position (or step) to the family that stands in for its code location: a ``where`` holding
# it names a family, not code (``names_family``).
FAMILY_MARK = "@"


def output_where(position: int, family: str) -> str:
    """``where`` of a wrong-output verdict: the first differing token's class and the model family.

    A crash names its code location; wrong tokens name no code, so the family stands in for it:
    the same symptom on another family runs other kernels (GDN, Mamba1/2, short conv) and is
    another bug. Without it a known bug masks every later one with its symptom (a qwen3_next state
    bug was skipped as the known lfm2 batch-order bug, both ``first-request-differs`` at token 0)."""
    return f"{'token0' if position == 0 else 'token1+'}{FAMILY_MARK}{family}"


def names_family(where: str) -> bool:
    """Whether a verdict's ``where`` names the model family (a wrong output: NaN, beyond noise, a self-consistency
    difference) rather than code (an error, crash or hang): only then does one bug get a signature per family."""
    return FAMILY_MARK in where


@dataclass
class Verdict:
    status: Status
    oracle: str  # which check decided: health, self_consistency, reference, component:<name>
    summary: str  # one line
    evidence: list[str] = field(default_factory=list)
    symptom: str = ""  # short machine-stable symptom (exception type, "first-request-diverges", ...)
    where: str = ""  # step/position or code location

    @property
    def signature(self) -> str:
        """Stable id of the bug's kind: the same bug shrunk or found again has the same signature."""
        if self.status != "divergence":
            return ""
        key = f"{self.oracle}|{self.symptom}|{self.where}"
        return f"{self.oracle}:{self.symptom}:{hashlib.sha1(key.encode()).hexdigest()[:8]}"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def one_line(self) -> str:
        return f"{self.status.upper()} [{self.oracle}] {self.summary}"


def combine(verdicts: list[Verdict]) -> Verdict:
    """First divergence wins; else unsupported if any; else pass."""
    for v in verdicts:
        if v.status == "divergence":
            return v
    for v in verdicts:
        if v.status == "unsupported":
            return v
    checks = ", ".join(v.oracle for v in verdicts)
    return Verdict("pass", checks or "none", f"no divergence ({checks})", [e for v in verdicts for e in v.evidence])
