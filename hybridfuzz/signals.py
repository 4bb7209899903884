"""Search signals from a judged case, for Hypothesis ``target()`` and ``event()`` (issue #16, item 3).

Pure: (case, trace, reference trace) -> Signals. The oracles answer yes/no; these numbers
say how close a passing case came, so ``Phase.target`` can climb towards a divergence:

- ``self_drift``: the largest top-1 logprob gap between a request and its first identical
  repeat in the same engine (0 on CPU when nothing is wrong: repeats are bit-identical);
- ``ref_drift``: the largest top-1 logprob gap to the ``auto`` reference over the positions
  before the first differing token (noise when the KV dtype is quantized);
- ``cached_tokens``: prompt tokens served from the prefix cache (hits reach the restore paths);
- ``max_batch``: the most prompts in one generate (decode batches reach the padding paths).

``events`` are coarse labels Hypothesis counts per run (``--hypothesis-show-statistics``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from hybridfuzz.case import Case, Generate
from hybridfuzz.trace import RequestResult, Trace


@dataclass
class Signals:
    self_drift: float = 0.0
    ref_drift: float = 0.0
    cached_tokens: int = 0
    max_batch: int = 0
    events: list[str] = field(default_factory=list)

    def targets(self) -> dict[str, float]:
        return {"self_drift": self.self_drift, "ref_drift": self.ref_drift,
                "cached_tokens": float(self.cached_tokens), "max_batch": float(self.max_batch)}


def _top1(result: RequestResult) -> list[tuple[int, float]]:
    return [(int(pos[0][0]), float(pos[0][1])) for pos in result.logprobs if pos]


def drift(a: RequestResult, b: RequestResult) -> float:
    """Largest |top-1 logprob difference| over the positions before the two outputs first differ."""
    worst = 0.0
    for (ta, la), (tb, lb) in zip(_top1(a), _top1(b)):
        if ta != tb:
            break
        worst = max(worst, abs(la - lb))
    return worst


def _finite(x: float) -> float:
    return x if x == x and abs(x) != float("inf") else 0.0


def compute(case: Case, trace: Trace, ref: Trace | None = None) -> Signals:
    from hybridfuzz.oracles.consistency import repeated_pairs

    s = Signals(events=[f"outcome:{trace.outcome}", f"kv:{case.engine.kv_cache_dtype}"])
    if trace.outcome != "ok":
        return s
    for _fi, _fr, first, _i, _r, later, _prompt in repeated_pairs(case, trace):
        s.self_drift = max(s.self_drift, _finite(drift(first, later)))
    gens = trace.generate_results()
    for _, outputs in gens:
        s.cached_tokens += sum(o.num_cached_tokens or 0 for o in outputs)
    s.max_batch = max((len(st.prompts) for st in case.steps if isinstance(st, Generate)), default=0)
    if ref is not None and ref.outcome == "ok":
        theirs = dict(ref.generate_results())
        for idx, outputs in gens:
            for a, b in zip(outputs, theirs.get(idx, [])):
                s.ref_drift = max(s.ref_drift, _finite(drift(a, b)))
    if s.cached_tokens:
        s.events.append("prefix-cache-hit")
    if s.max_batch > 2:
        s.events.append("batch>2")
    if s.self_drift > 0:
        s.events.append("repeat-drift>0")
    return s


def report(signals: Signals) -> None:
    """Hand the signals to Hypothesis; call from inside a @given test body."""
    from hypothesis import event, target

    for label, value in signals.targets().items():
        target(value, label=label)
    for e in signals.events:
        event(e)


def feed(case: Case, result) -> None:
    """The fuzz loop's call site: report the signals when HYBRIDFUZZ_SIGNALS=1 (off until measured to win)."""
    import os

    from hypothesis.control import currently_in_test_context

    # target()/event() exist only inside a Hypothesis test: background shrinking runs sessions drawn ahead
    if os.environ.get("HYBRIDFUZZ_SIGNALS") == "1" and currently_in_test_context():
        report(compute(case, result.trace, getattr(result, "reference", None)))
