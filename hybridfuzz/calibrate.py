"""Calibrate the reference oracle: how far does a quantized KV cache move a clean engine?

Runs random single-generate cases with a quantized ``kv_cache_dtype`` and their
``auto`` reference on the unmodified engine (pairs that are merely noisy by
construction), and measures per request: the logprob drift of shared top-k tokens
before the first flip, and the flip margins. The reference rule's false-alarm
rate is the share of requests it flags here.
"""
from __future__ import annotations

import random
import statistics

from hybridfuzz.case import Case, EngineConfig, Generate, OracleSpec
from hybridfuzz.model import FULL, LINEAR, ModelSpec
from hybridfuzz.oracles.compare import QUANTIZED, _lp, compare_requests


LOGPROBS = 20  # as the fuzz strategies ask: top-k membership needs a k well above 5


def noisy_pairs(n: int, dtypes: tuple[str, ...], seed: int = 0) -> list[Case]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        layers = tuple(rnd.choice([LINEAR, FULL]) for _ in range(rnd.randint(1, 6)))
        prompts = [[rnd.randrange(3, 512) for _ in range(rnd.choice([1, 3, 17, 64, 130, 260]))] for _ in range(rnd.randint(1, 3))]
        out.append(Case(ModelSpec(layers=layers, seed=rnd.randint(0, 3)), [Generate(prompts, max_tokens=8, logprobs=LOGPROBS)],
                        EngineConfig(kv_cache_dtype=rnd.choice(dtypes)), OracleSpec(checks=["health", "reference"])))
    return out


def measure(ref, got) -> tuple[float, float | None]:
    """(max drift before the first flip, flip margin at the first flip or None)."""
    drift = 0.0
    for pos, (ta, tb) in enumerate(zip(ref.tokens, got.tokens)):
        ra, rb = ref.logprobs[pos], got.logprobs[pos]
        if ta != tb:
            la, lb = _lp(ra, tb), _lp(rb, ta)
            if la is None or lb is None:
                return drift, float("inf")
            return drift, max(_lp(ra, ta) - la, _lp(rb, tb) - lb)
        for t, lp in ra:
            other = _lp(rb, int(t))
            if other is not None:
                drift = max(drift, abs(lp - other))
    return drift, None


def calibrate(host, n: int, dtypes: tuple[str, ...], seed: int = 0) -> dict:
    cases = noisy_pairs(n, dtypes, seed)
    batch = [c for case in cases for c in (case, case.reference_case())]
    traces = host.run_many(batch)
    drifts, margins, flagged, requests, skipped = [], [], 0, 0, 0
    top1, gaps = [], []  # the reference model's own confidence: top-1 logprob and top-1/top-2 gap
    for i, case in enumerate(cases):
        got, ref = traces[2 * i], traces[2 * i + 1]
        if got.outcome != "ok" or ref.outcome != "ok":
            skipped += 1
            continue
        for a, b in zip(ref.steps[0].outputs, got.steps[0].outputs):
            requests += 1
            for pos in a.logprobs:
                top1.append(pos[0][1])
                if len(pos) > 1:
                    gaps.append(pos[0][1] - pos[1][1])
            d, m = measure(a, b)
            drifts.append(d)
            if m is not None:
                margins.append(m)
            flagged += compare_requests(a, b, QUANTIZED) is not None
    q = lambda xs: [round(x, 3) for x in statistics.quantiles(xs, n=10)] if len(xs) >= 2 else xs  # noqa: E731
    return {"pairs": n, "skipped": skipped, "requests": requests, "flips": len(margins),
            "drift_deciles": q(drifts), "drift_max": round(max(drifts), 3) if drifts else None,
            "flip_margins": sorted(round(m, 3) for m in margins),
            "reference_top1_logprob_deciles": q(top1), "reference_top1_top2_gap_deciles": q(gaps),
            "reference_gap_below_0.1_share": round(sum(g < 0.1 for g in gaps) / len(gaps), 3) if gaps else None,
            "rule": {"flip_margin": QUANTIZED.flip_margin, "drift": QUANTIZED.drift},
            "false_alarms": flagged, "false_alarm_rate": round(flagged / requests, 4) if requests else None}
