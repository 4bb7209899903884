"""Speculative decoding: greedy output with drafts equals greedy output without them, and vLLM's own counters agree
with themselves.

vLLM's contract: rejection sampling keeps the target model's distribution, so greedy speculative output is the
greedy output (docs/features/speculative_decoding.md: "lossless"). Hybrid layers must roll their recurrent state
back over rejected drafts and keep it when a step proposes none; upstream broke both (#39273: ngram steps with zero
drafts left stale state; #53912, #43559: MTP with prefix caching). The reference is the same engine without
``speculative_config`` (oracles/feature.py); a verify step is a chunk of k+1 tokens, so the schedule tolerance
applies. From ``trace.stats`` (vLLM's metrics): accepted draft tokens never exceed proposed ones.
"""
from __future__ import annotations

from hybridfuzz.case import Case
from hybridfuzz.oracles.feature import compare_with_reference, feature_tolerance, nonfinite
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.trace import Trace

ORACLE = "spec_decode"


def counters(trace: Trace) -> str:
    s = trace.stats
    if not s:
        return "no spec-decode metrics"
    return (f"{s.get('spec_drafts', 0):g} drafts, {s.get('spec_draft_tokens', 0):g} draft tokens, "
            f"{s.get('spec_accepted_tokens', 0):g} accepted")


def check_spec_decode(case: Case, trace: Trace, ref: Trace | None) -> Verdict:
    spec = case.engine.speculative_config
    if spec is None:
        return Verdict("pass", ORACLE, "no speculative decoding in this case")
    proposed, accepted = trace.stats.get("spec_draft_tokens"), trace.stats.get("spec_accepted_tokens")
    if proposed is not None and accepted is not None and accepted > proposed:
        return Verdict("divergence", ORACLE, f"vLLM counted {accepted:g} accepted draft tokens of {proposed:g} proposed",
                       [counters(trace), f"method {spec.method}, {spec.num_speculative_tokens} speculative tokens"],
                       symptom="accepted-exceeds-proposed", where=f"metrics:{spec.method}")
    bad = nonfinite(case, trace, ORACLE)
    if bad is not None:
        return bad
    if ref is None:
        return Verdict("pass", ORACLE, f"no reference run to compare with ({counters(trace)})")
    v, compared = compare_with_reference(case, trace, ref, ORACLE, "without speculative decoding",
                                         feature_tolerance(case, trace, regroups=True), "differs-from-non-spec")
    if v is not None:
        v.summary += f" ({spec.method}, {spec.num_speculative_tokens} speculative tokens; {counters(trace)})"
        v.evidence.append(counters(trace))
        return v
    return Verdict("pass", ORACLE, f"{compared} greedy requests equal without speculative decoding ({counters(trace)})")
