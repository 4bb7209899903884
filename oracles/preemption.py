"""Preemption: a request preempted under KV pressure and recomputed gives the tokens it gives unpreempted.

With ``num_gpu_blocks_override`` the KV pool is too small for the case's concurrent requests, so vLLM's scheduler
preempts running ones (frees their blocks, recomputes them later). Their recurrent state blocks must come back clean
(#56524, #57580 and #54993: state blocks not zeroed on reallocation). The reference is the same engine with vLLM's
own pool size. The case must prove that preemption happened: vLLM's preemption counter (``trace.stats``) of 0 is
"not preempted", never a pass. A recompute is one prefill over prompt and output, so the schedule tolerance applies.
"""
from __future__ import annotations

from hybridfuzz.case import Case
from hybridfuzz.oracles.feature import compare_with_reference, feature_tolerance, nonfinite, not_exercised
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.trace import Trace

ORACLE = "preemption"


def check_preemption(case: Case, trace: Trace, ref: Trace | None) -> Verdict:
    if case.engine.num_gpu_blocks_override is None:
        return Verdict("pass", ORACLE, "no KV pressure asked for")
    preempted = trace.stats.get("preemptions")
    bad = nonfinite(case, trace, ORACLE)
    if bad is not None:
        return bad
    if not preempted:
        why = "vLLM kept no preemption counter" if preempted is None else "vLLM counted 0 preemptions"
        return not_exercised(ORACLE, f"not preempted: {why} with num_gpu_blocks_override {case.engine.num_gpu_blocks_override}")
    if ref is None:
        return Verdict("pass", ORACLE, f"{preempted:g} preemptions; no reference run to compare with")
    evidence = [f"case: {preempted:g} preemptions", f"reference: {ref.stats.get('preemptions', 'no counter')} preemptions"]
    v, compared = compare_with_reference(case, trace, ref, ORACLE, "without KV pressure",
                                         feature_tolerance(case, trace, regroups=True), "preempted-differs")
    if v is not None:
        v.summary += f" ({preempted:g} preemptions)"
        v.evidence += evidence
        return v
    return Verdict("pass", ORACLE, f"{compared} greedy requests equal without KV pressure ({preempted:g} preemptions)", evidence)
