"""Self-consistency: identical greedy requests within one engine must agree.

Covers the first request after start-up vs later ones, before vs after
sleep/wake, and prefix-cache hit vs miss: whatever the steps in between, the
same prompt with the same sampling must give the same tokens.
"""
from __future__ import annotations

from hybridfuzz.case import Case, Generate
from hybridfuzz.oracles.compare import EXACT, Tolerance, compare_requests
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.trace import Trace


def _describe(case: Case, step_idx: int) -> str:
    before = [type(s).__name__ for s in case.steps[:step_idx] if not isinstance(s, Generate)]
    return f"step {step_idx}" + (f" (after {', '.join(before)})" if before else "")


def check_self_consistency(case: Case, trace: Trace, tol: Tolerance = EXACT) -> Verdict:
    first: dict[tuple, tuple[int, int, object]] = {}
    compared = 0
    for idx, outputs in trace.generate_results():
        step = case.steps[idx]
        assert isinstance(step, Generate)
        for r, (prompt, result) in enumerate(zip(step.prompts, outputs)):
            key = (tuple(prompt), step.max_tokens)
            if key not in first:
                first[key] = (idx, r, result)
                continue
            fidx, fr, ref = first[key]
            compared += 1
            m = compare_requests(ref, result, tol)  # type: ignore[arg-type]
            if m:
                cached = f"cached tokens {ref.num_cached_tokens} vs {result.num_cached_tokens}"  # type: ignore[attr-defined]
                first_req = fidx == trace.generate_results()[0][0]
                symptom = "first-request-differs" if first_req else "repeat-differs"
                return Verdict(
                    "divergence", "self_consistency",
                    f"identical prompt (len {len(prompt)}) gave different output: step {fidx} req {fr} vs {_describe(case, idx)} req {r}, from token {m.position}",
                    [f"earlier: {m.a_tokens}", f"later:   {m.b_tokens}", f"why: {m.reason}", cached],
                    symptom=symptom, where="token0" if m.position == 0 else "token1+")
    return Verdict("pass", "self_consistency", f"{compared} repeated requests agree")
