"""LFM2: gated short convolutions (a conv state, no SSM) and attention layers in any order; tied head.

``conv`` layers keep a (hidden, conv_kernel - 1) conv state per sequence; attention has
per-head q/k layernorms and an ``out_proj``.
"""
from __future__ import annotations

from hybridfuzz.model.spec import (ATTENTION_GAIN, HEAD_GAIN, MIXER_GAIN, NORMAL, ONES, Family, ModelSpec, attention_plan,
                                   mlp_plan)

KINDS = ("conv", "full_attention")


def config(spec: ModelSpec) -> dict:
    h = spec.hidden_size
    return {
        "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2",
        "vocab_size": spec.vocab_size, "hidden_size": h, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "layer_types": list(spec.layers),
        "full_attn_idxs": [n for n, k in enumerate(spec.layers) if k == "full_attention"],
        "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_key_value_heads,
        "conv_L_cache": spec.conv_kernel, "conv_dim": h, "conv_bias": False, "block_dim": h,
        "block_ff_dim": spec.intermediate_size, "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False, "norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    head_dim = h // spec.num_attention_heads
    # vLLM's Lfm2ForCausalLM always ties the output head to the embedding: the embedding carries the
    # head gain (an unscaled N(0, 1) head gave 20-60 nat top-1 gaps and one token repeated).
    out = {"model.embed_tokens.weight": ((v, h), ("normal", HEAD_GAIN)), "model.embedding_norm.weight": ((h,), ONES)}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        out[p + "operator_norm.weight"] = ((h,), ONES)
        out[p + "ffn_norm.weight"] = ((h,), ONES)
        out.update(mlp_plan(p + "feed_forward.", h, i, gate="w1", up="w3", down="w2"))
        if kind == "conv":
            out[p + "conv.conv.weight"] = ((h, 1, spec.conv_kernel), NORMAL)
            out[p + "conv.in_proj.weight"] = ((3 * h, h), NORMAL)
            out[p + "conv.out_proj.weight"] = ((h, h), ("normal", MIXER_GAIN))
        else:
            a = p + "self_attn."
            out.update(attention_plan(a, h, spec.num_attention_heads, spec.num_key_value_heads, head_dim, out="out_proj"))
            out[a + "out_proj.weight"] = ((h, spec.num_attention_heads * head_dim), ("normal", ATTENTION_GAIN))
            out[a + "q_layernorm.weight"] = ((head_dim,), ONES)
            out[a + "k_layernorm.weight"] = ((head_dim,), ONES)
    return out


LFM2 = Family("lfm2", "Lfm2ForCausalLM", KINDS, "shortconv", config, plan, conv_kernels=(2, 3, 4),
              summary="gated short convolutions and attention", attention_kind="full_attention")
