"""Build a hybrid KV-cache allocation with vLLM's own code, from a layout dict.

Nothing here re-implements vLLM: the attention spec is vLLM's ``FullAttentionSpec``
passed through ``customize_attention_spec(TritonAttentionBackend, ...)`` (as the
model runner does), the GDN spec is ``MambaBase.get_kv_cache_spec`` on a stub
layer whose state shapes/dtypes come from vLLM's ``MambaStateShapeCalculator`` /
``MambaStateDtypeCalculator``; groups, page-size unification, tensor placement and
the allocation itself are ``get_kv_cache_groups``, ``get_kv_cache_config_from_groups``
and ``allocate_kv_cache``; GDN conv/ssm views are ``MambaBase.bind_kv_cache``.
The only stand-in is the ``vllm_config``: a namespace holding just the fields those
functions read (documented in ``fake_vllm_config``).

A layout dict (what strategies/layouts.py draws and a component case stores)::

    layers: [linear_attention, full_attention, ...]   # model layer kinds, in order
    kv_cache_dtype: int8_per_token_head | fp8_per_token_head | int4_per_token_head | auto | fp8 ...
    model_dtype: bfloat16 | float16 | float32
    num_kv_heads, head_size, block_size, num_blocks: int
    layout: a vllm.v1.kv_cache_layout.KVCacheLayout name (LBHNC = HND pages, LBNHC = NHD pages, BLHNC ...)
    gdn: {num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel, ssm_dtype}
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hybridfuzz import _guard

_guard.block_here()  # torchvision guard before vLLM


class LayoutRejected(Exception):
    """vLLM itself refuses this layout (e.g. a page layout that cannot express mixed page sizes)."""


@functools.lru_cache(maxsize=None)
def vllm_modules() -> SimpleNamespace:
    import torch
    from vllm.model_executor.layers.mamba.abstract import MambaBase
    from vllm.model_executor.layers.mamba.mamba_utils import MambaStateDtypeCalculator, MambaStateShapeCalculator
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import FullAttentionSpec, get_kv_quant_mode
    from vllm.v1.kv_cache_layout import KVCacheLayout
    from vllm.v1.worker.utils import allocate_kv_cache, customize_attention_spec

    class GDNStub(MambaBase):
        """A GDN layer reduced to what KV-cache code reads: state shapes and dtypes (from vLLM's calculators)."""

        def __init__(self, shapes, dtypes):
            self._shapes, self._dtypes = tuple(shapes), tuple(dtypes)

        def get_state_shape(self):
            return self._shapes

        def get_state_dtype(self):
            return self._dtypes

        @property
        def mamba_type(self):
            return MambaAttentionBackendEnum.GDN_ATTN

    return SimpleNamespace(torch=torch, MambaBase=MambaBase, GDNStub=GDNStub, shape_calc=MambaStateShapeCalculator,
                           dtype_calc=MambaStateDtypeCalculator, STR_DTYPE=STR_DTYPE_TO_TORCH_DTYPE,
                           TritonAttentionBackend=TritonAttentionBackend, kvu=kv_cache_utils,
                           FullAttentionSpec=FullAttentionSpec, get_kv_quant_mode=get_kv_quant_mode,
                           KVCacheLayout=KVCacheLayout, allocate_kv_cache=allocate_kv_cache,
                           customize_attention_spec=customize_attention_spec)


def fake_vllm_config(layout, num_blocks: int, block_size: int, mamba_cache_mode: str = "none") -> SimpleNamespace:
    """The fields of VllmConfig that kv_cache_utils and MambaBase.get_kv_cache_spec read; nothing else."""
    cache = SimpleNamespace(get_resolved_kv_cache_layout=lambda: layout, num_gpu_blocks_override=num_blocks,
                            prefix_cache_retention_interval=None, mamba_cache_mode=mamba_cache_mode,
                            mamba_block_size=block_size, mamba_page_size_padded=None, use_replayssm=False,
                            block_size=block_size)
    return SimpleNamespace(cache_config=cache, scheduler_config=SimpleNamespace(disable_hybrid_kv_cache_manager=False),
                           attention_config=SimpleNamespace(hisparse_config=None), speculative_config=None,
                           model_config=None, num_speculative_tokens=0)


def layer_names(layers: list[str]) -> list[str]:
    return [f"model.layers.{i}.linear_attn" if k == "linear_attention" else f"model.layers.{i}.self_attn.attn"
            for i, k in enumerate(layers)]


@dataclass
class Built:
    layout: dict
    specs: dict[str, Any]  # layer name -> spec before grouping
    groups: list  # KVCacheGroupSpec
    config: Any  # KVCacheConfig
    caches: dict[str, Any]  # layer name -> allocated view (as bound to the layer)
    storage_bytes: Any  # uint8 tensor over the whole backing allocation
    gdn_states: dict[str, tuple] = field(default_factory=dict)  # layer -> (conv, ssm) views from MambaBase.bind_kv_cache
    state_names: tuple[str, ...] = ("conv", "ssm")

    def group_of(self, layer: str) -> int:
        return next(i for i, g in enumerate(self.groups) if layer in g.layer_names)


def build(layout: dict) -> Built:
    m = vllm_modules()
    torch = m.torch
    try:
        kv_layout = m.KVCacheLayout[layout.get("layout", "LBHNC")]
    except KeyError:
        raise LayoutRejected(f"unknown KV cache layout {layout.get('layout')!r}") from None
    model_dtype = m.STR_DTYPE[layout.get("model_dtype", "bfloat16")]
    kvd = layout.get("kv_cache_dtype", "int8_per_token_head")
    if kvd == "auto":
        cache_dtype = model_dtype
    elif kvd in m.STR_DTYPE:
        cache_dtype = m.STR_DTYPE[kvd]
    else:
        raise LayoutRejected(f"unknown kv_cache_dtype {kvd!r}")
    block_size, num_blocks = int(layout["block_size"]), int(layout["num_blocks"])
    vc = fake_vllm_config(kv_layout, num_blocks, block_size)
    g = layout.get("gdn", {})
    shapes = m.shape_calc.gated_delta_net_state_shape(1, g.get("num_k_heads", 1), g.get("num_v_heads", 1), g.get("head_k_dim", 16),
                                                      g.get("head_v_dim", 16), g.get("conv_kernel", 4))
    dtypes = m.dtype_calc.gated_delta_net_state_dtype(model_dtype, "auto", g.get("ssm_dtype", "auto"))
    names = layer_names(layout["layers"])
    specs: dict[str, Any] = {}
    stubs: dict[str, Any] = {}
    for name, kind in zip(names, layout["layers"]):
        if kind == "linear_attention":
            stubs[name] = m.GDNStub(shapes, dtypes)
            specs[name] = stubs[name].get_kv_cache_spec(vc)
        else:
            base = m.FullAttentionSpec(block_size=block_size, num_kv_heads=int(layout["num_kv_heads"]), head_size=int(layout["head_size"]),
                                       dtype=cache_dtype, kv_quant_mode=m.get_kv_quant_mode(kvd))
            specs[name] = m.customize_attention_spec(m.TritonAttentionBackend, base)
    try:
        groups = m.kvu.get_kv_cache_groups(vc, dict(specs))
        config = m.kvu.get_kv_cache_config_from_groups(vc, groups, 1 << 40)
        caches = m.allocate_kv_cache(config, torch.device("cpu"), kv_layout, None)
    except (ValueError, NotImplementedError, AssertionError) as e:
        raise LayoutRejected(f"vLLM refuses this layout: {type(e).__name__}: {str(e).splitlines()[0][:160]}") from None
    if not caches:
        raise LayoutRejected("no KV cache tensors")
    storage = next(iter(caches.values())).untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage)
    built = Built(layout=layout, specs=specs, groups=groups, config=config, caches=caches, storage_bytes=raw)
    for name, stub in stubs.items():
        stub.bind_kv_cache(caches[name])
        built.gdn_states[name] = tuple(stub.kv_cache)
    return built


def byte_addresses(view) -> Any:
    """Byte offsets (from the storage start) of every byte of ``view``: shape (*view.shape, element_size)."""
    torch = vllm_modules().torch
    e = view.element_size()
    n = view.untyped_storage().nbytes()
    base = torch.arange(n, dtype=torch.int64)
    addr = torch.as_strided(base, view.shape, [s * e for s in view.stride()], view.storage_offset() * e) if view.numel() else base[:0].view(*view.shape)
    return addr.unsqueeze(-1) + torch.arange(e, dtype=torch.int64)


def view_extent(view) -> tuple[int, int]:
    """[first, last] byte a view addresses, from its shape/strides (no materialisation)."""
    e = view.element_size()
    lo = view.storage_offset() * e
    hi = lo + sum((d - 1) * s * e for d, s in zip(view.shape, view.stride()) if d > 0) + e - 1
    return lo, hi
