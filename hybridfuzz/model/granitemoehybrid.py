"""GraniteMoeHybrid (granite-4.0-h; vLLM 0.32.0 has no separate Bamba class): Mamba2 or
attention per layer, each followed by a shared MLP (no routed experts: num_local_experts 0).

The Granite multipliers are set to 1 (attention 1/sqrt(head_dim)) so the gains in spec.py
mean the same as in the other families.
"""
from __future__ import annotations

from hybridfuzz.model.spec import (MAMBA2_HEAD_DIM, MAMBA2_HEADS, MLP_GAIN, NORMAL, ONES, Family, ModelSpec,
                                   attention_plan, mamba2_plan)


def config(spec: ModelSpec) -> dict:
    head_dim = spec.hidden_size // spec.num_attention_heads
    return {
        "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "shared_intermediate_size": spec.intermediate_size, "num_local_experts": 0, "num_experts_per_tok": 0,
        "num_hidden_layers": len(spec.layers), "layer_types": list(spec.layers),
        "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_key_value_heads,
        "attention_bias": False, "position_embedding_type": "rope",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "rope_theta": 10000.0,
        "mamba_n_heads": MAMBA2_HEADS, "mamba_d_head": MAMBA2_HEAD_DIM, "mamba_n_groups": 1,
        "mamba_d_state": spec.ssm_state_size, "mamba_d_conv": spec.conv_kernel, "mamba_expand": 2,
        "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_proj_bias": False,
        "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0,
        "attention_multiplier": head_dim ** -0.5, "hidden_act": "silu", "rms_norm_eps": 1e-5,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0, "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    head_dim = h // spec.num_attention_heads
    out = {"model.embed_tokens.weight": ((v, h), ("normal", 0.0)), "model.norm.weight": ((h,), ONES),
           "lm_head.weight": ((v, h), ("normal", 4.0))}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        out[p + "input_layernorm.weight"] = ((h,), ONES)
        out[p + "post_attention_layernorm.weight"] = ((h,), ONES)
        out[p + "shared_mlp.input_linear.weight"] = ((2 * i, h), NORMAL)
        out[p + "shared_mlp.output_linear.weight"] = ((h, i), ("normal", MLP_GAIN))
        if kind == "mamba":
            out.update(mamba2_plan(p + "mamba.", spec))
        else:
            out.update(attention_plan(p + "self_attn.", h, spec.num_attention_heads, spec.num_key_value_heads, head_dim))
    return out


GRANITEMOEHYBRID = Family("granitemoehybrid", "GraniteMoeHybridForCausalLM", ("mamba", "attention"), "mamba2",
                          config, plan, summary="Mamba2 or attention per layer, each with a shared MLP", attention_kind="attention")
