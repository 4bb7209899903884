"""Mends (hybridfuzz/faults/mends.py): candidate upstream fixes the fault plugin applies in engine processes, so that
a replay can show which code explains a finding. Tested where they act without a GPU: seed 1's fill through the
component property that catches it (the real TritonAttentionImpl method, loaded by vLLM's own plugin loader)."""
import os
import subprocess
import sys

import pytest

from hybridfuzz.faults import mends

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = """
from vllm.plugins import load_general_plugins
load_general_plugins()  # what every engine process does: the hybridfuzz_faults entry point, then the mends
from hybridfuzz.case import load_case_file
from hybridfuzz.components.scale_view_fill import check
print(check(load_case_file("corpus/components/scale-view-fill.yaml").component["layout"]).status)
"""


def _scale_view_fill(env_extra: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (mends.ENV, "HYBRIDFUZZ_FAULT")}
    p = subprocess.run([sys.executable, "-c", CHECK], env={**env, **env_extra}, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.strip().splitlines()[-1]


def test_the_scale_fill_mend_removes_seed_1s_overwrite():
    from hybridfuzz.vllm_facts import vllm_version

    assert _scale_view_fill({mends.ENV: "scale-fill"}) == "pass"  # the views are made, no byte of the cache changes
    if vllm_version() == "0.32.0":  # the release the seed names: without the mend the fill overwrites GDN state
        assert _scale_view_fill({}) == "divergence"


def test_mends_parse_in_order_and_name_an_unknown_one():
    assert [m.name for m in mends.parse(" scale-fill ,")] == ["scale-fill"] and mends.parse("") == []
    assert [m.name for m in mends.parse("prefill-eager,scale-fill")] == ["prefill-eager", "scale-fill"]
    with pytest.raises(mends.MendError, match="HYBRIDFUZZ_MEND: unknown mend 'nope' \\(known: scale-fill, prefill-eager\\)"):
        mends.parse("scale-fill,nope")


def test_an_unknown_mend_is_one_line_before_any_work():
    env = {**os.environ, mends.ENV: "nope"}
    p = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "platform"], env=env, capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["hybridfuzz: HYBRIDFUZZ_MEND: unknown mend 'nope' (known: scale-fill, prefill-eager)"]


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_a_replay_with_a_mend_records_that_its_engine_ran_the_mended_code(tmp_path):
    """The variable alone is no evidence: the H200 replays of 2026-12-04 that still diverged with scale-fill recorded
    only HYBRIDFUZZ_MEND. The engine's settings now say which mends vLLM's own classes carry once the engine is up."""

    (tmp_path / "case.yaml").write_text("model: {layers: [linear_attention, full_attention]}\n"
                                        "steps:\n- generate: {prompts: [[5, 6, 7]], max_tokens: 2}\n")
    env = {k: v for k, v in os.environ.items() if k not in (mends.ENV, "HYBRIDFUZZ_FAULT")}
    for extra, expected in (({mends.ENV: "scale-fill"}, ["scale-fill"]), ({}, None)):
        assert _mends_in_place(tmp_path, {**env, **extra}) == expected


def _mends_in_place(tmp_path, env: dict) -> list[str] | None:
    """The engine settings' ``mends_in_place`` of a replay of tmp_path/case.yaml under ``env``."""
    import json

    p = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "replay", str(tmp_path / "case.yaml"), "--json"],
                       env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    return json.loads(p.stdout)["engine_settings"].get("mends_in_place")


@pytest.mark.slow
@pytest.mark.engine
def test_the_prefill_eager_mend_is_recorded_in_place_too(tmp_path):
    (tmp_path / "case.yaml").write_text("model: {layers: [linear_attention, full_attention]}\n"
                                        "steps:\n- generate: {prompts: [[5, 6, 7]], max_tokens: 2}\n")
    env = {k: v for k, v in os.environ.items() if k not in (mends.ENV, "HYBRIDFUZZ_FAULT")}
    assert _mends_in_place(tmp_path, {**env, mends.ENV: "prefill-eager"}) == ["prefill-eager"]
