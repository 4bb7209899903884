"""What the catalogue's faults read of the engine they run in: the GDN states and recurrent layers of vLLM's
current forward step, where per-token-head scales sit in a KV page, and the debug line.

A leaf: ``catalogue`` (the faults) and ``hooks`` (where vLLM calls them) both use it. vLLM is imported inside the
functions that read it, so the catalogue stays importable without vLLM.
"""
from __future__ import annotations

import os


def debug(msg: str) -> None:
    if os.environ.get("HYBRIDFUZZ_FAULT_DEBUG"):
        print(f"hybridfuzz fault: {msg}", flush=True)


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


def recurrent_layers_present() -> bool:
    """Whether the model of the current forward step has recurrent layers (GDN, Mamba, ShortConv: vLLM's MambaBase),
    whose state shares the attention layers' KV pages."""
    from vllm.forward_context import get_forward_context
    from vllm.model_executor.layers.mamba.abstract import MambaBase

    return any(isinstance(layer, MambaBase) for layer in get_forward_context().no_compile_layers.values())


def live_gdn_states() -> list[tuple]:
    """(SSM state tensor, [slot of each request in batch order]) of every GDN layer in the current forward step."""
    from vllm.forward_context import get_forward_context
    from vllm.v1.attention.backends.gdn_attn import GDNAttentionMetadata

    ctx = get_forward_context()
    md = ctx.attn_metadata
    out = []
    for prefix, m in (md.items() if isinstance(md, dict) else ()):
        layer = ctx.no_compile_layers.get(prefix)
        if isinstance(m, GDNAttentionMetadata) and m.non_spec_state_indices_tensor is not None and layer is not None:
            out.append((layer.kv_cache[1], [int(x) for x in m.non_spec_state_indices_tensor[:m.num_decodes + m.num_prefills].tolist()]))
    return out
