"""Fault injection: re-create the two seed bugs' mechanisms inside the CPU engine.

Loaded by vLLM itself through the ``vllm.general_plugins`` entry point, in every
engine process; inert unless ``HYBRIDFUZZ_FAULT`` names a fault. The fuzzer
never reads this variable: it is how we measure that the fuzzer finds bugs of
these kinds on its own.

- ``scale-fill`` (seed 1, int8_per_token_head ``_ensure_scale_caches``): the first
  time an attention layer runs in a real step with a quantized KV cache, write
  float32 1.0 at the per-token-head scale positions (one float32 after each
  head's K and after its V, in every slot of every page) across the whole KV
  tensor, which the hybrid allocator shares with GDN conv/SSM state.
- ``wake-zero`` (seed 2, PR #41602): after wake-up with a quantized KV cache,
  call ``.zero_()`` on every KV-cache entry the model runner keeps, including
  the lists of GDN/Mamba state tensors: AttributeError, as on vLLM 0.26.0.
"""
from __future__ import annotations

import os

FAULTS = ("scale-fill", "wake-zero")


def _quantized(dtype: str) -> bool:
    return dtype not in ("auto", "bfloat16", "float16", "float32")


def scale_positions_fp32(page_bytes: int, block_size: int, num_kv_heads: int, head_bytes: int) -> list[int]:
    """float32 indices, within one page, of the per-token-head K and V scales."""
    entry = head_bytes + 4  # one head's K (or V) followed by its float32 scale
    out = []
    for slot in range(block_size):
        for head in range(num_kv_heads):
            for kv in (0, 1):
                byte = ((slot * num_kv_heads + head) * 2 + kv) * entry + head_bytes
                if byte + 4 <= page_bytes and byte % 4 == 0:
                    out.append(byte // 4)
    return out


def _install_scale_fill() -> None:
    import torch
    from vllm.v1.attention.backends import cpu_attn

    impl = cpu_attn.CPUAttentionBackendImpl
    original = impl.forward
    done: set[int] = set()

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, *args, **kwargs):
        if attn_metadata is not None and id(layer) not in done and _quantized(str(self.kv_cache_dtype)) and kv_cache.numel():
            done.add(id(layer))
            storage = kv_cache.untyped_storage()
            num_blocks, _, block_size, _ = kv_cache.shape  # CPU layout: [blocks, kv_heads, block_size, 2*head]
            page_bytes = storage.nbytes() // num_blocks
            raw = torch.empty(0, dtype=torch.float32, device=kv_cache.device).set_(storage, 0, (storage.nbytes() // 4,))
            per_page = torch.tensor(scale_positions_fp32(page_bytes, block_size, self.num_kv_heads, self.head_size * kv_cache.element_size()), dtype=torch.long)
            if per_page.numel():
                pages = torch.arange(num_blocks, dtype=torch.long) * (page_bytes // 4)
                raw[(pages[:, None] + per_page[None, :]).reshape(-1)] = 1.0
                if os.environ.get("HYBRIDFUZZ_FAULT_DEBUG"):
                    print(f"hybridfuzz fault scale-fill: {per_page.numel()} float32 per page x {num_blocks} pages, query {tuple(query.shape)}", flush=True)
        return original(self, layer, query, key, value, kv_cache, attn_metadata, output, *args, **kwargs)

    impl.forward = forward


def _install_wake_zero() -> None:
    from vllm.v1.worker import cpu_worker

    original = cpu_worker.CPUWorker.wake_up

    def wake_up(self, tags=None):
        original(self, tags)
        if _quantized(str(self.cache_config.cache_dtype)):
            # Every layer's KV-cache entry as the layer keeps it: attention layers a
            # tensor, GDN/Mamba layers a list/tuple of state tensors (no zero_).
            context = self.model_runner.compilation_config.static_forward_context
            for layer in context.values():
                entry = getattr(layer, "kv_cache", None)
                if entry is not None:
                    entry.zero_()

    cpu_worker.CPUWorker.wake_up = wake_up


def register() -> None:
    fault = os.environ.get("HYBRIDFUZZ_FAULT", "")
    if not fault:
        return
    for name in fault.split(","):
        if name == "scale-fill":
            _install_scale_fill()
        elif name == "wake-zero":
            _install_wake_zero()
        else:
            raise ValueError(f"HYBRIDFUZZ_FAULT: unknown fault {name!r} (known: {', '.join(FAULTS)})")
