"""A feature against the same engine without it: what the spec-decode, async-scheduling, preemption and abort oracles
share (docs/dimensions.md).

The reference run is the case with ``oracle.reference`` applied; the strategies set it to the feature turned off
(``speculative_config: null``, ``async_scheduling: false``, ``num_gpu_blocks_override: null``) and, with the abort
check, ``Case.reference_case`` makes its abort steps abort nothing. Greedy requests both runs completed are compared
with compare.py's calibrated tolerances, never looser: exact (EXACT) where the feature leaves the arithmetic alone on a
batch-invariant CPU engine, the schedule variance (consistency.schedule_variance) where it changes how tokens are
grouped into forwards (a speculative verify step is a chunk of k+1 tokens; a preempted request is recomputed as one
prefill), and the KV dtype's reference
tolerance when the reference changes more than the feature. Sampled requests are left to the seeded-sampling oracle:
a speculative step draws its random numbers otherwise, by design.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterator

from hybridfuzz.case import Case, EngineConfig, Generate, Sleep, Submit
from hybridfuzz.oracles.compare import EXACT, Tolerance, compare_requests, mismatch_kind, reference_tolerance
from hybridfuzz.oracles.consistency import batch_scaled, chunks_prompts, schedule_variance
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import RequestResult, Trace

# Engine fields a feature oracle's reference may turn off and still compare like for like.
FEATURE_FIELDS = ("speculative_config", "async_scheduling", "num_gpu_blocks_override", "scheduling_policy")
NOT_EXERCISED = "not-exercised"  # the symptom of a feature case whose feature did not happen (not a pass)
ABORTED = "abort"  # vLLM's finish_reason of an aborted request


def not_exercised(oracle: str, summary: str, evidence: list[str] | None = None) -> Verdict:
    """The case meant to test a feature that did not happen in its run: neither a pass nor a finding."""
    return Verdict("unsupported", oracle, summary, evidence or [], symptom=NOT_EXERCISED)


def on_cpu(trace: Trace) -> bool:
    return trace.env.get("device", "cpu") == "cpu"


def only_feature_differs(case: Case) -> bool:
    """Whether the reference changes nothing but the feature fields (else its numbers move for another reason too)."""
    ref, engine = _fields(case.reference_case().engine), _fields(case.engine)
    return {**ref, **{name: engine[name] for name in FEATURE_FIELDS}} == engine


def _fields(engine) -> dict:
    """An EngineConfig's fields, or those of the namespace a standalone reproducer holds instead (export/script.py)."""
    return dataclasses.asdict(engine) if dataclasses.is_dataclass(engine) else dict(vars(engine))


def feature_tolerance(case: Case, trace: Trace, regroups: bool) -> Tolerance:
    """``regroups``: the feature groups tokens into forwards otherwise (spec decode, preemption's recompute)."""
    if not only_feature_differs(case):
        return reference_tolerance(case.engine.kv_cache_dtype)
    if regroups or not on_cpu(trace) or chunks_prompts(case):
        return schedule_variance("cpu" if on_cpu(trace) else "gpu", case)
    return EXACT


def greedy(step) -> bool:
    return isinstance(step, (Generate, Submit)) and step.temperature == 0.0


def completed(case: Case, trace: Trace) -> Iterator[tuple[int, int, RequestResult]]:
    """(step index, request index, result) of every request a generate or submit step completed: not aborted, not cut
    short. A case with sleep steps leaves submitted requests to the sleep/wake oracles (hybridfuzz/sleepwake.py)."""
    protocol = any(isinstance(s, Sleep) for s in case.steps)
    for s in trace.steps:
        if s.error is not None or s.kind not in ("generate", "submit") or (protocol and s.kind == "submit"):
            continue
        step = case.steps[s.index]
        for r, result in enumerate(s.outputs):
            if result.finish_reason != ABORTED and len(result.tokens) == step.max_tokens:
                yield s.index, r, result


def paired(case: Case, trace: Trace, ref: Trace) -> Iterator[tuple[int, int, RequestResult, RequestResult]]:
    """(step index, request index, case result, reference result) of each greedy request both runs completed."""
    theirs = {(idx, r): result for idx, r, result in completed(case.reference_case(), ref)}
    for idx, r, result in completed(case, trace):
        if greedy(case.steps[idx]) and (idx, r) in theirs:
            yield idx, r, result, theirs[(idx, r)]


def cut_result(result: RequestResult, n: int) -> RequestResult:
    """The result's first n tokens (each sample's too), with their logprobs."""
    samples = [s[:n] for s in result.samples] if result.samples else None
    return dataclasses.replace(result, tokens=result.tokens[:n], logprobs=result.logprobs[:n], samples=samples)


def nonfinite(case: Case, trace: Trace, oracle: str) -> Verdict | None:
    """A NaN or +inf logprob in any request of the case, submitted ones included (health looks at generate steps)."""
    for s in trace.steps:
        for r, result in enumerate(s.outputs if s.kind in ("generate", "submit") else []):
            for pos, ranked in enumerate(result.logprobs):
                if any(math.isnan(lp) or (math.isinf(lp) and lp > 0) for _, lp in ranked):
                    return Verdict("divergence", oracle, f"step {s.index} ({s.kind}) req {r}: non-finite logprob at token {pos}",
                                   [f"top logprobs at token {pos}: {ranked[:5]}"], symptom="nonfinite",
                                   where=output_where(pos, case.model.architecture))
    return None


def compare_with_reference(case: Case, trace: Trace, ref: Trace, oracle: str, without: str, tol: Tolerance,
                           symptom: str, only: set[tuple[int, int]] | None = None) -> tuple[Verdict | None, int]:
    """The first greedy request (of ``only``, if given) whose output is not an acceptable rendering of the reference's
    under ``tol``, as a divergence; and how many were compared. With online fp8 weights a drift or flip is set aside
    (oracles/consistency.py BATCH_SCALES): the feature regroups the batches whose activation scales the weights use
    (three spec_decode findings of an H100 campaign on vLLM 0.33.0, 2026-12-06, had identical tokens and a lower-ranked
    logprob 0.3-0.4 nats off, all with ``quantization: fp8``)."""
    compared = 0
    for idx, r, got, want in paired(case, trace, ref):
        if only is not None and (idx, r) not in only:
            continue
        compared += 1
        m = compare_requests(want, got, tol)
        if m and batch_scaled(case, mismatch_kind(m.reason)):
            continue
        if m:
            return Verdict("divergence", oracle, f"step {idx} req {r} diverges from the same engine {without} at token {m.position}",
                           [f"{without}: {m.a_tokens}", f"case: {' ' * max(0, len(without) - 4)}{m.b_tokens}", f"why: {m.reason}",
                            f"tolerance: flip margin {tol.flip_margin}, drift {tol.drift}"],
                           symptom=symptom, where=output_where(m.position, case.model.architecture)), compared
    return None, compared


def feature_off(engine: EngineConfig) -> dict:
    """The reference overrides that turn every feature of ``engine`` off (what the strategies write)."""
    out: dict = {}
    if engine.speculative_config is not None:
        out["speculative_config"] = None
    if engine.async_scheduling:
        out["async_scheduling"] = False
    if engine.num_gpu_blocks_override is not None:
        out["num_gpu_blocks_override"] = None
    return out
