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
    with pytest.raises(mends.MendError, match="HYBRIDFUZZ_MEND: unknown mend 'nope' \\(known: scale-fill\\)"):
        mends.parse("scale-fill,nope")


def test_an_unknown_mend_is_one_line_before_any_work():
    env = {**os.environ, mends.ENV: "nope"}
    p = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "platform"], env=env, capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["hybridfuzz: HYBRIDFUZZ_MEND: unknown mend 'nope' (known: scale-fill)"]
