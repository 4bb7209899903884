"""Falcon-H1: every layer runs attention and Mamba2 in parallel on the same input, then an MLP.

The only layer kind is ``parallel``; the pattern is its count. All of Falcon-H1's
multipliers are 1 so the gains in spec.py mean the same as in the other families.
"""
from __future__ import annotations

from hybridfuzz.model.spec import ONES, Family, ModelSpec, attention_plan, mamba2_plan, mlp_plan, MAMBA2_HEADS, MAMBA2_HEAD_DIM

HEAD_DIM = 64


def config(spec: ModelSpec) -> dict:
    return {
        "architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads, "head_dim": HEAD_DIM, "attention_bias": False,
        "mamba_n_heads": MAMBA2_HEADS, "mamba_d_head": MAMBA2_HEAD_DIM, "mamba_n_groups": 1,
        "mamba_d_ssm": MAMBA2_HEADS * MAMBA2_HEAD_DIM, "mamba_d_state": spec.ssm_state_size,
        "mamba_d_conv": spec.conv_kernel, "mamba_expand": 2, "mamba_chunk_size": 128, "mamba_conv_bias": True,
        "mamba_proj_bias": False, "mamba_rms_norm": False, "mamba_norm_before_gate": False,
        "embedding_multiplier": 1.0, "lm_head_multiplier": 1.0, "attention_in_multiplier": 1.0,
        "attention_out_multiplier": 1.0, "key_multiplier": 1.0, "ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0,
        "ssm_multipliers": [1.0, 1.0, 1.0, 1.0, 1.0], "mlp_multipliers": [1.0, 1.0],
        "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    out = {"model.embed_tokens.weight": ((v, h), ("normal", 0.0)), "model.final_layernorm.weight": ((h,), ONES),
           "lm_head.weight": ((v, h), ("normal", 4.0))}
    for n in range(len(spec.layers)):
        p = f"model.layers.{n}."
        out[p + "input_layernorm.weight"] = ((h,), ONES)
        out[p + "pre_ff_layernorm.weight"] = ((h,), ONES)
        out.update(mamba2_plan(p + "mamba.", spec, gated_norm=False))
        out.update(attention_plan(p + "self_attn.", h, spec.num_attention_heads, spec.num_key_value_heads, HEAD_DIM))
        out.update(mlp_plan(p + "feed_forward.", h, i))
    return out


FALCON_H1 = Family("falcon_h1", "FalconH1ForCausalLM", ("parallel",), "mamba2", config, plan,
                   summary="attention and Mamba2 in parallel in every layer")
