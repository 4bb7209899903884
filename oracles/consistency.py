"""Self-consistency: identical greedy requests within one engine must agree.

Covers the first request after start-up vs later ones, before vs after
sleep/wake, and prefix-cache hit vs miss: whatever the steps in between, the
same prompt with the same sampling must give the same tokens. Which outputs
are defined at all comes from the sleep/wake table (hybridfuzz/sleepwake.py):
level 1 keeps the weights, level 2 + reload_weights must match, level 2
without a reload is undefined and never compared.
"""
from __future__ import annotations

import dataclasses

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, Generate, Submit
from hybridfuzz.oracles.compare import EXACT, Tolerance, compare_requests
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import RequestResult, Trace

# Identical requests computed on another schedule differ numerically. GPU engines are not
# batch-invariant: another batch shape, other chunk boundaries or a prefix-cache hit take other
# kernel paths. On an H200 with vLLM 0.32.0 (2026-11-30, results/gpu-h200x2-2026-11-30-vllm-0.32.0/,
# `hybridfuzz calibrate --traces ...`): TRITON_ATTN, cache hit vs miss, up to 0.165 nats with kv
# auto and 0.123 with int8_per_token_head, no flips (68 pairs); the default backend 0.000. On CPU
# requests are bit-identical unless chunked prefill (a small max_num_batched_tokens) splits two
# repeats of a prompt at other places: then up to 0.115 nats, no flips (80 pairs,
# results/calibration-cpu-2026-11-30/noise-chunked-auto-fp8.json.gz). About 1.5x the largest; the
# seed-1 symptom ("garbage from the second token") is far above.
SCHEDULE_VARIANCE = Tolerance(flip_margin=0.25, drift=0.25)


def tolerance_for(device: str, chunked_prefill: bool = False) -> Tolerance:
    """Exact on CPU with whole-prompt prefills; otherwise the measured schedule variance (above)."""
    return EXACT if device == "cpu" and not chunked_prefill else SCHEDULE_VARIANCE


def chunks_prompts(case: Case) -> bool:
    """Does the case's engine split prompts into chunks (a token budget per step)?"""
    return bool(case.engine.extra.get("max_num_batched_tokens"))


def _describe(case: Case, step_idx: int) -> str:
    before = [type(s).__name__ for s in case.steps[:step_idx] if not isinstance(s, Generate)]
    return f"step {step_idx}" + (f" (after {', '.join(before)})" if before else "")


def compared_results(case: Case, trace: Trace):
    """(step index, outputs) of the generate and submit steps whose outputs the sleep/wake protocol defines
    (hybridfuzz/sleepwake.py: not after a level-2 sleep without reload_weights). A submitted request that a
    sleep aborted ended early: only complete ones are compared."""
    host = sleepwake.SERVER if trace.env.get("api") == "openai-server" else sleepwake.OFFLINE
    defined = sleepwake.compared_steps(case.steps, host)
    for s in trace.steps:
        if s.kind in ("generate", "submit") and s.error is None and s.index in defined:
            step = case.steps[s.index]
            yield s.index, [o if s.kind == "generate" or len(o.tokens) == step.max_tokens else None for o in s.outputs]


def _first_tokens(result: RequestResult, n: int) -> RequestResult:
    return dataclasses.replace(result, tokens=result.tokens[:n], logprobs=result.logprobs[:n])


def repeated_pairs(case: Case, trace: Trace):
    """Each later run of an identical request (same kind and prompt), with its first run:
    (first step, first request index, first result, later step, later request index, later result, prompt).
    Decoding is greedy, so runs with other ``max_tokens`` must agree on the shorter run's tokens: both
    results are cut to that length (a repeat with another length is still a comparison)."""
    first: dict[tuple, tuple[int, int, RequestResult, int]] = {}
    for idx, outputs in compared_results(case, trace):
        step = case.steps[idx]
        assert isinstance(step, (Generate, Submit))
        for r, (prompt, result) in enumerate(zip(step.prompts, outputs)):
            if result is None:
                continue
            key = (type(step), tuple(prompt))
            if key not in first:
                first[key] = (idx, r, result, step.max_tokens)
                continue
            fidx, fr, fresult, fmax = first[key]
            n = min(fmax, step.max_tokens)
            yield fidx, fr, _first_tokens(fresult, n), idx, r, _first_tokens(result, n), prompt


def check_self_consistency(case: Case, trace: Trace, tol: Tolerance | None = None) -> Verdict:
    """tol: default ``tolerance_for`` the trace's device."""
    tol = tol or tolerance_for(trace.env.get("device", "cpu"), chunks_prompts(case))
    compared = 0
    for fidx, fr, ref, idx, r, result, prompt in repeated_pairs(case, trace):
        compared += 1
        # Requests left in flight share batches with others and resume after a sleep by recomputation.
        pair_tol = SCHEDULE_VARIANCE if isinstance(case.steps[idx], Submit) else tol
        m = compare_requests(ref, result, pair_tol)  # type: ignore[arg-type]
        if m:
            cached = f"cached tokens {ref.num_cached_tokens} vs {result.num_cached_tokens}"  # type: ignore[attr-defined]
            first_req = fidx == next(compared_results(case, trace))[0]
            between = {type(s).__name__ for s in case.steps[fidx + 1:idx]}
            # The protocol step between the two runs names the bug's kind: a reload, a sleep/wake, or neither.
            symptom = ("reload-differs" if "ReloadWeights" in between else "wake-differs" if "Sleep" in between
                       else "first-request-differs" if first_req else "repeat-differs")
            return Verdict(
                "divergence", "self_consistency",
                f"identical prompt (len {len(prompt)}) gave different output: step {fidx} req {fr} vs {_describe(case, idx)} req {r}, from token {m.position}",
                [f"earlier: {m.a_tokens}", f"later:   {m.b_tokens}", f"why: {m.reason}", cached],
                symptom=symptom, where=output_where(m.position, case.model.architecture))
    return Verdict("pass", "self_consistency", f"{compared} repeated requests agree")
