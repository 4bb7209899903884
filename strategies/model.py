"""Model shapes: a family (of those the platform can run), a layer order that family allows
(1 to 8 layers), its own knobs (conv width, SSM state size), and a weights seed.

Each choice lists its simplest value first, so shrinking moves toward qwen3_next (the
first family), fewer layers, the default conv width and state size, and short memory (the HF
init; ``memory: long`` stays in a minimal case only when the bug needs a state that lasts). Engine knobs that
only exist for some families (``mamba_ssm_cache_dtype``) are drawn by ``family_engine_extra``.
"""
from __future__ import annotations

import dataclasses
import typing

from hypothesis import strategies as st

from hybridfuzz.model import FAMILIES, FULL, LINEAR, ModelSpec, check_spec
from hybridfuzz.model.spec import Memory

SSM_STATE_SIZES = (64, 16, 32, 128)
MAMBA_FAMILIES_MIXERS = ("mamba1", "mamba2")
MEMORIES = typing.get_args(Memory)  # "short" (the default) first
# Head counts of a case on two GPUs (engine.tensor_parallel_size: 2; hybridfuzz/tensor_parallel.py has vLLM's rules),
# (query heads, KV heads): the even split first (the spec's default, one KV head a GPU), then one KV head replicated
# on both GPUs, the uneven split vLLM allows. Query heads stay 2 or 4: families that derive head_dim divide hidden_size.
TP2_ATTENTION_HEADS = ((4, 2), (4, 1), (2, 2), (2, 1))
# (key heads, value heads) of GDN on two GPUs: vLLM splits them only evenly (the spec's 1 and 1 would leave a GPU
# none), one key head a GPU with one or two value heads.
TP2_GDN_HEADS = ((2, 2), (2, 4))


def layer_orders(min_layers: int = 1, max_layers: int = 8, kinds=(LINEAR, FULL)) -> st.SearchStrategy[tuple[str, ...]]:
    # sampled_from shrinks toward its first element; lists shrink toward shorter.
    return st.lists(st.sampled_from(list(kinds)), min_size=min_layers, max_size=max_layers).map(tuple)


@st.composite
def _jamba_layers(draw, max_layers: int) -> tuple[str, ...]:
    """Jamba's only patterns: attention exactly where i % period == offset."""
    n = draw(st.integers(1, max_layers))
    period = draw(st.integers(1, n + 1))
    offset = draw(st.integers(0, period - 1))
    return tuple("attention" if i % period == offset else "mamba" for i in range(n))


def family_layers(family: str, max_layers: int = 8) -> st.SearchStrategy[tuple[str, ...]]:
    if family == "jamba":
        return _jamba_layers(max_layers)
    kinds = FAMILIES[family].layer_kinds
    return layer_orders(1, max_layers, kinds).filter(lambda ls: check_spec(ModelSpec(layers=ls, architecture=family)) is None)


@st.composite
def model_specs(draw, max_layers: int = 8, families: tuple[str, ...] = ("qwen3_next",), tensor_parallel_size: int = 1) -> ModelSpec:
    """``tensor_parallel_size`` 2 also draws head counts that split over two GPUs, evenly or unevenly where vLLM
    allows it; 1 draws nothing more (the spec's default heads), so single-GPU draws are as they were."""
    family = draw(st.sampled_from(list(families)))
    layers = draw(family_layers(family, max_layers))
    fam = FAMILIES[family]
    kernels = sorted(fam.conv_kernels, key=lambda k: (k != 4, k))  # 4 (the default) first
    conv_kernel = draw(st.sampled_from(kernels)) if family != "qwen3_next" else 4
    state = draw(st.sampled_from(SSM_STATE_SIZES)) if fam.mixer in MAMBA_FAMILIES_MIXERS else 64
    seed = draw(st.integers(0, 3))
    # Long memory carries a stale or corrupt state through the prompt to the output (ModelSpec.memory).
    memory = draw(st.sampled_from(MEMORIES)) if fam.has_state_decay else "short"
    spec = ModelSpec(layers=layers, architecture=family, conv_kernel=conv_kernel, ssm_state_size=state, seed=seed, memory=memory)
    if tensor_parallel_size > 1:
        heads, kv = draw(st.sampled_from(TP2_ATTENTION_HEADS))
        spec = dataclasses.replace(spec, num_attention_heads=heads, num_key_value_heads=kv)
        if fam.mixer == "gdn":
            k, v = draw(st.sampled_from(TP2_GDN_HEADS))
            spec = dataclasses.replace(spec, linear_num_key_heads=k, linear_num_value_heads=v)
    assert check_spec(spec) is None, check_spec(spec)
    return spec


@st.composite
def family_engine_extra(draw, model: ModelSpec) -> dict:
    """Engine knobs of the family: the Mamba SSM-state dtype (vLLM's MambaDType), auto first."""
    if FAMILIES[model.architecture].mixer not in MAMBA_FAMILIES_MIXERS:
        return {}
    from hybridfuzz import vllm_facts

    dtype = draw(st.sampled_from(vllm_facts.mamba_dtypes()))
    return {} if dtype == "auto" else {"mamba_ssm_cache_dtype": dtype}
