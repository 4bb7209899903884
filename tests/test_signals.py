"""Search signals (hybridfuzz/signals.py) on hand-made traces: each value moves with what it measures."""
from hybridfuzz.case import Case, Generate
from hybridfuzz.model import FULL, LINEAR, ModelSpec
from hybridfuzz.signals import compute, drift
from hybridfuzz.trace import RequestResult, StepResult, Trace

CASE = Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([[1, 2, 3]]), Generate([[1, 2, 3], [4, 5, 6], [7, 8]])])


def req(lps, tokens=None, cached=None):
    tokens = tokens or [10 + i for i in range(len(lps))]
    return RequestResult(prompt_len=3, tokens=tokens, logprobs=[[[t, lp]] for t, lp in zip(tokens, lps)], num_cached_tokens=cached)


def trace(first, later, cached=0):
    return Trace(steps=[StepResult(0, "generate", outputs=[first]),
                        StepResult(1, "generate", outputs=[later, req([-1.0]), req([-1.0])])])


def test_drift_stops_at_the_first_differing_token():
    assert drift(req([-1.0, -2.0]), req([-1.5, -2.0])) == 0.5
    assert drift(req([-1.0, -2.0], [10, 11]), req([-1.0, -9.0], [10, 99])) == 0.0


def test_self_drift_cached_tokens_and_batch():
    s = compute(CASE, trace(req([-1.0, -1.0]), req([-1.0, -1.25], cached=2)))
    assert s.self_drift == 0.25 and s.cached_tokens == 2 and s.max_batch == 3
    assert "prefix-cache-hit" in s.events and "batch>2" in s.events
    clean = compute(CASE, trace(req([-1.0, -1.0]), req([-1.0, -1.0])))
    assert clean.self_drift == 0.0 and "prefix-cache-hit" not in clean.events


def test_reference_drift_and_non_finite_values():
    t = trace(req([-1.0]), req([-1.0]))
    ref = trace(req([-3.0]), req([float("nan")]))
    assert compute(CASE, t, ref).ref_drift == 2.0
    assert compute(CASE, Trace(outcome="crash")).targets()["self_drift"] == 0.0
