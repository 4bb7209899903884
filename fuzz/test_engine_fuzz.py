"""Bounded engine fuzz targets: real vLLM engines, every oracle on.

A failure here is a new divergence in the installed vLLM (or in hybridfuzz's
oracles): Hypothesis prints the shrunk case; ``hybridfuzz fuzz`` writes it as YAML.
Bugs already recorded in corpus/ (by signature) are known and do not fail the
target, as in ``hybridfuzz fuzz``: CI stays red only for something new.

The KV dtypes are those the platform's attention backends declare; the CPU engine
also accepts others and computes garbage with them (corpus/found/int8-per-token-head-nan-cpu.yaml,
NOTES.md), which campaigns explore. HYBRIDFUZZ_ALL_DTYPES=1 offers every dtype here too.
"""
import dataclasses
import os

import pytest
from hypothesis import event, given

from hybridfuzz.case import device_kind, dump_case
from hybridfuzz.executor import evaluate
from hybridfuzz.findings import known_signatures
from hybridfuzz.strategies import cases, detect_platform
from hybridfuzz.strategies.platform import declared_kv_dtypes

PLATFORM = detect_platform()
if os.environ.get("HYBRIDFUZZ_ALL_DTYPES") != "1":
    PLATFORM = dataclasses.replace(PLATFORM, kv_cache_dtypes=declared_kv_dtypes())
KNOWN = known_signatures(os.path.join(os.path.dirname(__file__), "..", "corpus"), on=device_kind(PLATFORM.device))


@pytest.mark.engine
@given(case=cases(PLATFORM, max_layers=4, max_steps=4))
def test_hybrid_engine_has_no_new_divergence(engine_host, case):
    result = evaluate(case, engine_host)
    v = result.verdict
    if v.status == "divergence" and v.signature in KNOWN:
        event(f"known bug: {v.signature}")
        return
    assert v.status != "divergence", f"{v.one_line()}\n" + "\n".join(v.evidence) + "\n" + dump_case(case)
