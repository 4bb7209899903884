"""Tests of the component checks themselves: they pass correct code and fail wrong code."""
from __future__ import annotations

import pytest

import hybridfuzz  # noqa: F401

SHRUNK = dict(layers=["linear_attention", "full_attention"], kv_cache_dtype="int8_per_token_head", model_dtype="bfloat16",
              num_kv_heads=1, head_size=32, block_size=16, layout="LBHNC", num_blocks=2,
              gdn=dict(num_k_heads=1, num_v_heads=1, head_k_dim=16, head_v_dim=16, conv_kernel=2, ssm_dtype="auto"),
              owners=["linear_attention"])


def views_only(impl, kv_cache):
    """What the fix does: the same float32 scale views, no fill (scales are written per token by reshape_and_cache)."""
    import torch

    nb, nkv, bs, content = kv_cache.shape
    e = kv_cache.element_size()
    hs = content // 2 - 4 // e
    base = torch.tensor([], dtype=torch.float32).set_(kv_cache.untyped_storage())
    s = [x * e // 4 for x in kv_cache.stride()]
    off = kv_cache.storage_offset() * e // 4
    impl._k_scale_cache = torch.as_strided(base, (nb, bs, nkv), (s[0], s[2], s[1]), off + hs * e // 4)
    impl._v_scale_cache = torch.as_strided(base, (nb, bs, nkv), (s[0], s[2], s[1]), off + (content // 2 + hs) * e // 4)


def test_sentinel_check_passes_a_correct_implementation():
    from hybridfuzz.components.scale_view_fill import check

    for layout in ("LBHNC", "LBNHC", "BLHNC"):
        v = check({**SHRUNK, "layout": layout}, ensure=views_only)
        assert v.status == "pass", v.one_line()


def test_sentinel_check_catches_one_stray_byte():
    from hybridfuzz.components.scale_view_fill import check

    def one_byte(impl, kv_cache):
        views_only(impl, kv_cache)
        kv_cache.view(-1)[kv_cache.numel() - 1].fill_(0)  # the last byte of the last block (a GDN-owned one)

    v = check({**SHRUNK, "num_blocks": 3, "owners": ["full_attention", "linear_attention"]}, ensure=one_byte)
    assert v.status == "divergence" and "1 of" in v.summary


def test_real_method_fails_on_0_32_0_with_gdn_report():
    from hybridfuzz.components.scale_view_fill import check
    from hybridfuzz.vllm_facts import vllm_version

    v = check(SHRUNK)
    if vllm_version() != "0.32.0":
        pytest.skip("seed bug is pinned to 0.32.0")
    assert v.status == "divergence" and v.symptom == "overwrites-live-gdn-state"
    assert "ssm state of block 1" in v.summary and "conv state of block 1" in v.summary


def test_wake_reinit_catches_the_old_zero_loop():
    from hybridfuzz.components.wake_reinit import check

    class OldRunner:  # vLLM < PR #41602
        def init_fp8_kv_scales(self):
            for t in self.kv_caches:
                if t is not None:
                    t.zero_()

    class FixedRunner:
        def init_fp8_kv_scales(self):
            for t in self.kv_caches:
                for x in (t if isinstance(t, list) else [t]):
                    if x is not None:
                        x.zero_()

    bad = check(["tensor", "list", "none"], paths=[(OldRunner, "init_fp8_kv_scales")])
    assert bad.status == "divergence" and "'list' object has no attribute 'zero_'" in bad.summary
    assert check(["tensor", "list", "none"], paths=[(FixedRunner, "init_fp8_kv_scales")]).status == "pass"


def test_block_pool_check_catches_double_ownership():
    from hybridfuzz.components import kv_layout

    assert kv_layout.check_block_pool(6, [["alloc", 0, 2], ["alloc", 1, 3], ["free", 0], ["alloc", 2, 2]]).status == "pass"

    import vllm.v1.core.block_pool as bp

    orig = bp.BlockPool

    class Leaky:  # a pool that forgets to take blocks off the free list
        def __init__(self, **kw):
            self.p = orig(**kw)
            self.null_block = self.p.null_block

        out = 0

        def get_new_blocks(self, n):
            self.out += n
            return self.p.blocks[1:1 + n]  # always the first free ones, even if handed out already

        def get_num_free_blocks(self):
            return self.p.num_gpu_blocks - 1 - self.out

        def free_blocks(self, b):
            pass

    bp.BlockPool = Leaky
    try:
        v = kv_layout.check_block_pool(6, [["alloc", 0, 2], ["alloc", 1, 2]])
    finally:
        bp.BlockPool = orig
    assert v.status == "divergence" and v.symptom == "block-double-owned"


@pytest.mark.parametrize("text", ["", "- [", "{a: 1}", "schema: x", "model: 3\nsteps: []", "\x00\x01", "a: &a [*a]", "!!python/object:os.system {}",
                                  "model: {}\nsteps: [generate]", "kind: component\nmodel: {}\nsteps: [reset_prefix_cache]\ncomponent: [1]"])
def test_loader_harness_rejects_garbage_with_caseerror_only(text):
    atheris = pytest.importorskip("atheris")  # noqa: F841
    import importlib.util
    import pathlib

    spec = importlib.util.spec_from_file_location("atheris_loader", pathlib.Path(__file__).parent.parent / "fuzz" / "atheris_loader.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.test_one_input(text.encode())  # raises only if a non-CaseError escapes or the message is multi-line


def test_committed_case_replays_as_divergence():
    import pathlib

    from hybridfuzz.case import load_case_file
    from hybridfuzz.components import run_component
    from hybridfuzz.vllm_facts import vllm_version

    case = load_case_file(str(pathlib.Path(__file__).parent.parent / "corpus" / "components" / "scale-view-fill.yaml"))
    v = run_component(case)
    assert v.status == case.expect.get(vllm_version(), v.status)


def test_exported_component_script_exits_1_with_the_bug_and_0_with_the_fix(capsys):
    """The standalone script of corpus/components/scale-view-fill.yaml (no hybridfuzz inside) runs vLLM's method:
    exit 1 naming the overwritten GDN state; with the method replaced by the fix (views, no fill) exit 0."""
    import importlib.util
    import pathlib
    import sys

    from vllm.v1.attention.backends.triton_attn import TritonAttentionImpl

    from hybridfuzz.case import load_case_file
    from hybridfuzz.export import standalone_script
    from hybridfuzz.vllm_facts import vllm_version

    case = load_case_file(str(pathlib.Path(__file__).parent.parent / "corpus" / "components" / "scale-view-fill.yaml"))
    spec = importlib.util.spec_from_loader("exported_component_repro", loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    exec(compile(standalone_script(case), "<repro>", "exec"), mod.__dict__)
    if vllm_version() == "0.32.0":
        assert mod.main([]) == 1
        out = capsys.readouterr().out
        assert "REPRODUCED" in out and "live GDN state overwritten: GDN model.layers.0.linear_attn conv state of block 1" in out
    original = TritonAttentionImpl._ensure_scale_caches
    TritonAttentionImpl._ensure_scale_caches = views_only
    try:
        assert mod.main([]) == 0
    finally:
        TritonAttentionImpl._ensure_scale_caches = original
    assert "NOT REPRODUCED: [component:scale_view_fill] TritonAttentionImpl._ensure_scale_caches changed none of" in capsys.readouterr().out
