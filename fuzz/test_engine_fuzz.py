"""Bounded engine fuzz targets: real vLLM engines, every oracle on.

A failure here is a real divergence in the installed vLLM (or in hybridfuzz's
oracles): Hypothesis prints the shrunk case; ``hybridfuzz fuzz`` writes it as YAML.
"""
import pytest
from hypothesis import given

from hybridfuzz.case import dump_case
from hybridfuzz.executor import evaluate
from hybridfuzz.strategies import cases, detect_platform

PLATFORM = detect_platform()


@pytest.mark.engine
@given(case=cases(PLATFORM, max_layers=4, max_steps=4))
def test_hybrid_engine_has_no_divergence(engine_host, case):
    result = evaluate(case, engine_host)
    assert result.verdict.status != "divergence", f"{result.verdict.one_line()}\n" + "\n".join(result.verdict.evidence) + "\n" + dump_case(case)
