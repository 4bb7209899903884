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
from hybridfuzz.engines.base import Host
from hybridfuzz.model import FULL, LINEAR, ModelSpec
from hybridfuzz.oracles.compare import compare_requests, measure, reference_tolerance

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


def calibrate(host: Host, n: int, dtypes: tuple[str, ...], seed: int = 0, save: str | None = None) -> dict:
    """save: also write the pairs (case, its trace, the reference's trace) as JSON (gzip if the name ends in .gz)."""
    cases = noisy_pairs(n, dtypes, seed)
    batch = [c for case in cases for c in (case, case.reference_case())]
    traces = host.run_many(batch)
    records = [(case, traces[2 * i], traces[2 * i + 1]) for i, case in enumerate(cases)]
    if save:
        save_pairs(save, records)
    return judge_pairs(records, n)


def save_pairs(path: str, records) -> None:
    import gzip
    import json

    from hybridfuzz.case import case_to_dict

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump([{"case": case_to_dict(c), "trace": t.to_dict(), "reference": r.to_dict()} for c, t, r in records], f)


def load_pairs(path: str) -> list:
    import gzip
    import json

    from hybridfuzz.case import case_from_dict
    from hybridfuzz.trace import Trace

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [(case_from_dict(r["case"]), Trace.from_dict(r["trace"]), Trace.from_dict(r["reference"])) for r in json.load(f)]


def judge_pairs(records, n: int | None = None) -> dict:
    """The report for (case, trace, reference trace) records: overall, and per KV dtype (outcomes, the errors
    of runs that did not finish ok, drift, flips, flips outside the other's top-k, requests its reference tolerance flags and that rule)."""
    drifts, margins, flagged, requests, skipped = [], [], 0, 0, 0
    top1, gaps = [], []  # the reference model's own confidence: top-1 logprob and top-1/top-2 gap
    by: dict[str, dict] = {}
    for case, got, ref in records:
        dtype = case.engine.kv_cache_dtype
        g = by.setdefault(dtype, {"pairs": 0, "outcomes": {}, "errors": [], "requests": 0, "flips": 0,
                                  "outside_topk": 0, "drift_max": 0.0, "flip_margin_max": 0.0, "min_topk_overlap": None,
                                  "flagged": 0, "rule": _rule(dtype)})
        g["pairs"] += 1
        outcome = got.outcome if ref.outcome == "ok" else f"reference {ref.outcome}"
        g["outcomes"][outcome] = g["outcomes"].get(outcome, 0) + 1
        if got.outcome != "ok" or ref.outcome != "ok":
            skipped += 1
            err = (got.error if got.outcome != "ok" else ref.error)
            line = err.one_line() if err else outcome
            if line not in g["errors"]:
                g["errors"].append(line)
            continue
        pairs = [(a, b) for (_, ra), (_, rb) in zip(ref.generate_results(), got.generate_results()) for a, b in zip(ra, rb)]
        for a, b in pairs:
            requests += 1
            g["requests"] += 1
            for pos in a.logprobs:
                top1.append(pos[0][1])
                if len(pos) > 1:
                    gaps.append(pos[0][1] - pos[1][1])
            d, m = measure(a, b)
            drifts.append(d)
            g["drift_max"] = round(max(g["drift_max"], d), 3)
            if m is not None:
                margins.append(m)
                g["flips"] += 1
                if m == float("inf"):
                    g["outside_topk"] += 1
                    ov = topk_overlap_at_flip(a, b)
                    g["min_topk_overlap"] = ov if g["min_topk_overlap"] is None else min(g["min_topk_overlap"], ov)
                else:
                    g["flip_margin_max"] = round(max(g["flip_margin_max"], m), 3)
            bad = compare_requests(a, b, reference_tolerance(dtype)) is not None
            flagged += bad
            g["flagged"] += bad
    q = lambda xs: [round(x, 3) for x in statistics.quantiles(xs, n=10)] if len(xs) >= 2 else xs  # noqa: E731
    return {"pairs": n if n is not None else len(records), "skipped": skipped, "requests": requests, "flips": len(margins),
            "drift_deciles": q(drifts), "drift_max": round(max(drifts), 3) if drifts else None,
            "flip_margins": sorted(round(m, 3) for m in margins),
            "reference_top1_logprob_deciles": q(top1), "reference_top1_top2_gap_deciles": q(gaps),
            "reference_gap_below_0.1_share": round(sum(g < 0.1 for g in gaps) / len(gaps), 3) if gaps else None,
            "by_dtype": dict(sorted(by.items())),
            "false_alarms": flagged, "false_alarm_rate": round(flagged / requests, 4) if requests else None}


def _rule(dtype: str) -> dict:
    """The reference tolerance that judges this dtype (oracles/compare.py reference_tolerance), for the report."""
    tol = reference_tolerance(dtype)
    return {"flip_margin": tol.flip_margin, "drift": tol.drift, "min_topk_overlap": tol.min_topk_overlap}


def topk_overlap_at_flip(ref, got) -> float:
    """At the first differing token: the share of the smaller top-k set found in the other (compare_requests' overlap)."""
    for pos, (ta, tb) in enumerate(zip(ref.tokens, got.tokens)):
        if ta != tb:
            top_a, top_b = {int(t) for t, _ in ref.logprobs[pos]}, {int(t) for t, _ in got.logprobs[pos]}
            return round(len(top_a & top_b) / max(1, min(len(top_a), len(top_b))), 3)
    return 1.0

