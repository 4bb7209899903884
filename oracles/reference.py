"""Reference: the case against itself with ``kv_cache_dtype: auto`` (by default).

Quantisation noise may flip near-ties; corrupted state moves the whole
distribution. See ``compare.py`` for the rule and README for its calibration.
"""
from __future__ import annotations

from typing import Iterator

from hybridfuzz.case import Case, Generate
from hybridfuzz.oracles.compare import QUANTIZED, Tolerance, compare_requests, is_degenerate, measure, reference_tolerance
from hybridfuzz.oracles.verdict import Verdict, output_where
from hybridfuzz.trace import RequestResult, Trace


def compared_requests(trace: Trace, ref: Trace) -> Iterator[tuple[int, int, RequestResult, RequestResult]]:
    """(step index, request index, the case's result, the reference's) for every request both engines answered."""
    ref_steps = dict(ref.generate_results())
    for idx, outputs in trace.generate_results():
        for r, (got, want) in enumerate(zip(outputs, ref_steps.get(idx, []))):
            yield idx, r, got, want


def check_reference(case: Case, trace: Trace, ref: Trace, tol: Tolerance | None = None) -> Verdict:
    """``tol``: the case's KV dtype's (compare.reference_tolerance) unless given."""
    tol = tol or reference_tolerance(case.engine.kv_cache_dtype)
    compared = 0
    for idx, r, got, want in compared_requests(trace, ref):
        assert isinstance(case.steps[idx], Generate)
        if case.steps[idx].temperature > 0.0:
            continue  # a sampled token is decided by the draw, not by a margin: oracles/sampling.py
        compared += 1
        if is_degenerate(got.tokens) and not is_degenerate(want.tokens):
            return Verdict("divergence", "reference", f"step {idx} req {r}: degenerate output (one token repeated), reference is not",
                           [f"case:      {got.tokens}", f"reference: {want.tokens}"], symptom="degenerate", where="generate")
        m = compare_requests(want, got, tol)
        if m:
            return Verdict(
                "divergence", "reference",
                f"step {idx} req {r} diverges from the reference ({', '.join(f'{k}={v}' for k, v in case.oracle.reference.items())}) at token {m.position}",
                [f"reference: {m.a_tokens}", f"case:      {m.b_tokens}", f"why: {m.reason}"],
                symptom="beyond-noise", where=output_where(m.position, case.model.architecture))
    return Verdict("pass", "reference", f"{compared} requests within noise of the reference")


def reference_distance(trace: Trace, ref: Trace | None, tol: Tolerance = QUANTIZED) -> tuple[float | None, float | None]:
    """(largest drift before a first flip, largest flip margin; inf: a token outside the other's top-k) over the
    case's requests against the reference's, relevant tokens only; None where nothing was compared or nothing flipped.
    Every campaign records both per case (campaign/records.py ``CaseEvent``), so the reference tolerance can be
    calibrated on the GPU from the cases it draws: QUANTIZED was calibrated on CPU, where an fp8 KV cache leaves
    the query in bf16, and on the GPU it does not (results/2026-12-04-h200-vllm0.33.0-default-campaign/README.md)."""
    if ref is None or trace.outcome != "ok" or ref.outcome != "ok":
        return None, None
    drifts, margins = [], []
    for _, _, got, want in compared_requests(trace, ref):
        drift, margin = measure(want, got, tol.relevant_nats)
        drifts.append(drift)
        if margin is not None:
            margins.append(margin)
    return (round(max(drifts), 4) if drifts else None), (round(max(margins), 4) if margins else None)
