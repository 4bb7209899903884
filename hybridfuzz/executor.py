"""Case -> engine host -> Traces -> oracles -> Verdict. The one path every command takes."""
from __future__ import annotations

from dataclasses import dataclass, field

from hybridfuzz.case import Case
from hybridfuzz.oracles.consistency import check_self_consistency
from hybridfuzz.oracles.health import check_health
from hybridfuzz.oracles.reference import check_reference
from hybridfuzz.oracles.verdict import Verdict, combine
from hybridfuzz.trace import Trace


@dataclass
class Result:
    verdict: Verdict
    trace: Trace
    reference: Trace | None = None
    extra: dict = field(default_factory=dict)


def needs_reference(case: Case) -> bool:
    return "reference" in case.oracle.checks and case.reference_case().engine != case.engine


def judge(case: Case, trace: Trace, ref: Trace | None) -> Verdict:
    """Pure: apply the case's checks to traces already run."""
    checks = case.oracle.checks
    verdicts = [check_health(trace)]
    if verdicts[0].status != "pass":
        return verdicts[0]
    if ref is not None:
        v = check_health(ref, label="reference")
        if v.status == "unsupported":
            return v
        if v.status == "divergence":
            v.summary = "reference run failed too: " + v.summary
            return v
    if "self_consistency" in checks:
        verdicts.append(check_self_consistency(case, trace))
    if "reference" in checks and ref is not None:
        verdicts.append(check_reference(case, trace, ref))
    return combine(verdicts)


def evaluate(case: Case, host, timeout: float | None = None) -> Result:
    """Run the case (and its reference, concurrently where the host allows) and judge."""
    if case.kind == "component":
        from hybridfuzz.components import run_component

        return Result(run_component(case), Trace(outcome="ok"))
    if needs_reference(case):
        trace, ref = host.run_many([case, case.reference_case()], timeout)
    else:
        trace, ref = host.run(case, timeout), None
    return Result(judge(case, trace, ref), trace, ref)
