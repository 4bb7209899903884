"""Hypothesis strategies for KV-cache layouts (component properties; no vLLM import here).

Small builders, each listing its simplest choice first so shrinking ends on the
smallest layout that still fails: one GDN + one attention layer, int8 per-token-head,
HND pages (LBHNC), 2 blocks (block 0 is vLLM's null block), the smallest heads.
Block ``owners`` shrink toward ``linear_attention``: a shrunk failure shows the live
GDN state a write landed on.
"""
from __future__ import annotations

from hypothesis import strategies as st

LINEAR, FULL = "linear_attention", "full_attention"
PER_TOKEN_HEAD = ("int8_per_token_head", "fp8_per_token_head", "int4_per_token_head")
OTHER_KV = ("auto", "fp8")
# LBHNC: HND pages; LBNHC: NHD pages; the rest: layer-inner/head-outer packings vLLM knows.
LAYOUTS = ("LBHNC", "LBNHC", "BLHNC", "BLNHC", "LHBNC", "BHLNC")
OWNERS = (LINEAR, FULL, "free")


@st.composite
def layer_kinds(draw, min_linear: int = 1, min_full: int = 1, max_layers: int = 4) -> list[str]:
    n_lin = draw(st.integers(min_linear, max(min_linear, max_layers - max(min_full, 1))))
    n_full = draw(st.integers(min_full, max(min_full, max_layers - n_lin)))
    base = [LINEAR] * n_lin + [FULL] * n_full
    return list(draw(st.permutations(base))) if len(base) > 1 else base


@st.composite
def gdn_dims(draw) -> dict:
    k = draw(st.integers(1, 2))
    return {"num_k_heads": k, "num_v_heads": k * draw(st.integers(1, 2)), "head_k_dim": draw(st.sampled_from([16, 32, 64])),
            "head_v_dim": draw(st.sampled_from([16, 32, 64])), "conv_kernel": draw(st.integers(2, 4)),
            "ssm_dtype": draw(st.sampled_from(["auto", "float32"]))}


@st.composite
def hybrid_layouts(draw, kv_dtypes=PER_TOKEN_HEAD, min_linear: int = 1, min_full: int = 1, max_blocks: int = 6) -> dict:
    """A hybrid layout: layer kinds, attention/GDN shapes, page layout, block count and block owners."""
    layers = draw(layer_kinds(min_linear=min_linear, min_full=min_full))
    num_blocks = draw(st.integers(2, max_blocks))
    return {
        "layers": layers,
        "kv_cache_dtype": draw(st.sampled_from(kv_dtypes)),
        "model_dtype": draw(st.sampled_from(["bfloat16", "float16", "float32"])),
        "num_kv_heads": draw(st.integers(1, 4)),
        "head_size": draw(st.sampled_from([32, 64, 128])),
        "block_size": draw(st.sampled_from([16, 32, 64])),
        "layout": draw(st.sampled_from(LAYOUTS)),
        "num_blocks": num_blocks,
        "gdn": draw(gdn_dims()),
        "owners": draw(st.lists(st.sampled_from(OWNERS), min_size=num_blocks - 1, max_size=num_blocks - 1)),
    }


def layer_spec_sets() -> st.SearchStrategy[dict]:
    """Property 3: any mix (pure attention, pure GDN, hybrid), any KV dtype."""
    return st.one_of(hybrid_layouts(kv_dtypes=PER_TOKEN_HEAD + OTHER_KV, min_linear=0, min_full=1),
                     hybrid_layouts(kv_dtypes=PER_TOKEN_HEAD + OTHER_KV, min_linear=1, min_full=0))


@st.composite
def block_pool_runs(draw, max_blocks: int = 12, max_ops: int = 24) -> dict:
    """Alloc/free sequences over owners (request x group ids) for vLLM's BlockPool."""
    n = draw(st.integers(2, max_blocks))
    op = st.one_of(st.tuples(st.just("alloc"), st.integers(0, 5), st.integers(1, 4)).map(list),
                   st.tuples(st.just("free"), st.integers(0, 5)).map(list))
    return {"num_blocks": n, "ops": draw(st.lists(op, max_size=max_ops)), "enable_caching": draw(st.booleans())}


def runner_kv_entries() -> st.SearchStrategy[list[str]]:
    """What a model runner keeps in kv_caches: tensors, lists of tensors (multi-state layers), None."""
    return st.lists(st.sampled_from(["tensor", "list", "none"]), min_size=1, max_size=4)
