"""Self-consistency noise: how far do identical requests drift on an engine with no bug?

Runs cases whose every generate repeats one prompt (twice in one batch, once more in a
later step, where prefix caching may serve it) and saves the whole traces, so that the
self-consistency rule can be calibrated offline, on this machine, from a GPU's traces:

    python3 -m hybridfuzz.bench.noise --cases 40 --kv-dtypes auto,int8_per_token_head \
        --attention-backend TRITON_ATTN --workers 12 --out noise.json
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
from dataclasses import dataclass
from typing import Literal

from hybridfuzz.case import Case, EngineConfig, Generate, OracleSpec, case_to_dict
from hybridfuzz.model import FULL, LINEAR, ModelSpec


def repeat_cases(n: int, dtypes: tuple[str, ...], backend: str | None, seed: int = 0, chunked: bool = False,
                 max_tokens: int = 8) -> list[Case]:
    """chunked: a small token budget per step, so the repeats' prompts are split at other places. max_tokens: tokens per
    request; the fuzz strategies ask for up to 64 (on CPU, seed 5 of 2026-12-07 drifted alike at 8 and at 64)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        layers = tuple(rnd.choice([LINEAR, FULL]) for _ in range(rnd.randint(1, 4)))
        p = [rnd.randrange(3, 512) for _ in range(rnd.choice([1, 3, 17, 64, 127, 130, 260]))]
        steps = [Generate([p, p], max_tokens=max_tokens, logprobs=20), Generate([p], max_tokens=max_tokens, logprobs=20)]
        caching = rnd.choice([None, True, False])
        extra = {"max_num_batched_tokens": rnd.choice([64, 128, 200]), "enable_chunked_prefill": True} if chunked else {}
        for dtype in dtypes:
            out.append(Case(ModelSpec(layers=layers, seed=rnd.randint(0, 3)), steps,
                            EngineConfig(kv_cache_dtype=dtype, attention_backend=backend, enable_prefix_caching=caching,
                                         extra=extra),
                            OracleSpec(checks=["health", "self_consistency"])))
    return out


def load_records(path: str) -> list[tuple[Case, "Trace"]]:  # noqa: F821  (Trace is imported below, lazily)
    from hybridfuzz.case import case_from_dict
    from hybridfuzz.trace import Trace

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [(case_from_dict(r["case"]), Trace.from_dict(r["trace"])) for r in json.load(f)]


def summarize(records) -> dict:
    """Per (kv dtype, attention backend, chunked or not, cache hit vs miss): pairs, max drift, flips, and how many the
    current self-consistency rule flags (on an engine with no bug, each one is a false alarm)."""
    from hybridfuzz.oracles.compare import compare_requests, measure
    from hybridfuzz.oracles.consistency import chunks_prompts, repeated_pairs, tolerance_for

    groups: dict[str, dict] = {}
    for case, trace in records:
        if trace.outcome != "ok":
            continue
        chunked = chunks_prompts(case)
        tol = tolerance_for(trace.env.get("device", "cpu"), case)
        for _, _, a, _, _, res, _ in repeated_pairs(case, trace):
            hit = "hit-vs-miss" if a.num_cached_tokens != res.num_cached_tokens else "same-cache"
            key = (f"{case.engine.kv_cache_dtype} / {case.engine.attention_backend or 'default'} / "
                   f"{'chunked' if chunked else 'whole prompts'} / {hit}")
            g = groups.setdefault(key, {"pairs": 0, "max_drift": 0.0, "flips": 0, "flagged": 0})
            drift, flip_margin = measure(a, res)
            g["pairs"] += 1
            g["max_drift"] = round(max(g["max_drift"], drift), 3)
            g["flips"] += flip_margin is not None
            g["flagged"] += compare_requests(a, res, tol) is not None
    return dict(sorted(groups.items()))


# Which drift an event keeps, and the tolerance its pairs are judged by: repeats on any schedule (SCHEDULE_VARIANCE),
# or only those the engine computed the same way (consistency.same_schedule, held to EXACT).
DriftField = Literal["repeat_drift", "exact_drift", "reference_drift", "reference_margin"]


@dataclass(frozen=True)
class DriftFloor:
    """Repeat drifts of one feature value's cases, from a run's events (CaseEvent.repeat_drift or exact_drift)."""
    feature: str
    value: str
    cases: int
    median: float
    p99: float
    max: float
    over_tolerance: int  # cases above the field's tolerance: a false alarm each, unless a control set it aside (or a bug)

    def line(self) -> str:
        return (f"{self.feature}={self.value}: {self.cases} cases, drift median {self.median:.3f}, p99 {self.p99:.3f}, "
                f"max {self.max:.3f}, {self.over_tolerance} over the tolerance")


def drift_floor(run_dir: str, field: DriftField = "repeat_drift") -> list[DriftFloor]:
    """Per feature value (shared_features.FEATURES), how far repeated requests drifted in the cases a campaign ran:
    the data to calibrate a GPU's schedule tolerance from, on every family and backend the campaign drew (with
    ``exact_drift``: the false-alarm floor of the exact rule for same-schedule repeats; with ``reference_drift`` and
    ``reference_margin``: the case against its reference engine, each counted against its KV dtype's reference
    tolerance (compare.reference_tolerance), the flip margin inf where a token left the other's top-k). Drift only: a replaced
    distribution is no drift and is never counted here. A real bug's drift is in it too, so read the upper
    quantiles beside the run's findings."""
    from hybridfuzz.campaign.records import iter_events
    from hybridfuzz.oracles.compare import EXACT, reference_tolerance
    from hybridfuzz.oracles.consistency import SCHEDULE_VARIANCE
    from hybridfuzz.triage.shared_features import FEATURES

    def tolerance(e) -> float:
        """The bound the oracle holds this event's ``field`` to."""
        if field == "exact_drift":
            return EXACT.drift
        if field in ("reference_drift", "reference_margin"):
            tol = reference_tolerance(e.kv_cache_dtype)
            return tol.drift if field == "reference_drift" else tol.flip_margin
        return SCHEDULE_VARIANCE.drift

    events = [e for e in iter_events(run_dir) if getattr(e, field) is not None and e.phase == "generate"]  # not a shrink's variants
    out = []
    for name, read in FEATURES.items():
        by: dict[str, list[tuple[float, float]]] = {}  # value -> (distance, its bound)
        for e in events:
            if value := read(e):
                by.setdefault(value, []).append((getattr(e, field), tolerance(e)))
        for value, pairs in sorted(by.items()):
            ds = sorted(d for d, _ in pairs)
            out.append(DriftFloor(name, value, len(ds), ds[len(ds) // 2], ds[min(len(ds) - 1, int(0.99 * len(ds)))], ds[-1],
                                  sum(d > bound for d, bound in pairs)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--kv-dtypes", default="auto")
    ap.add_argument("--attention-backend")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunked", action="store_true", help="small max_num_batched_tokens: prompts split into chunks")
    ap.add_argument("--max-tokens", type=int, default=8, help="tokens per request (the fuzz strategies ask up to 64)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from hybridfuzz.engines.forkserver import ForkServer

    cases = repeat_cases(a.cases, tuple(a.kv_dtypes.split(",")), a.attention_backend, a.seed, a.chunked, a.max_tokens)
    with ForkServer(workers=a.workers, timeout=600, warm=False) as host:
        traces = host.run_many(cases)
    with open(a.out, "w") as f:
        json.dump([{"case": case_to_dict(c), "trace": t.to_dict()} for c, t in zip(cases, traces)], f)
    print(f"{len(cases)} cases, {sum(t.outcome == 'ok' for t in traces)} ok -> {a.out}")


if __name__ == "__main__":
    main()
