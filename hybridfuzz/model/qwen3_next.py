"""Qwen3-Next and Qwen3.5: Gated DeltaNet + gated full attention (the seeds' families).

Both use zero-centred RMSNorms (weight 0 means scale 1) except the GDN output norm.
vLLM's Qwen3-Next needs MoE blocks: two experts, both always routed (top-k = all), keep
the MLP cheap and free of routing flips. Qwen3.5 (text) has dense MLPs and a split GDN
input projection (in_proj_qkv / z / b / a).
"""
from __future__ import annotations

from hybridfuzz.model.spec import (FULL, LINEAR, MIXER_GAIN, NORMAL, ONES, ZEROS, ALOG, Family, ModelSpec, dt_bias_init,
                                   attention_plan, mlp_plan)

NUM_EXPERTS = 2


def _common_config(spec: ModelSpec) -> dict:
    return {
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "layer_types": list(spec.layers),
        "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim, "linear_num_key_heads": spec.linear_num_key_heads,
        "linear_num_value_heads": spec.linear_num_value_heads, "linear_key_head_dim": spec.linear_key_head_dim,
        "linear_value_head_dim": spec.linear_value_head_dim, "linear_conv_kernel_dim": spec.conv_kernel,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        "partial_rotary_factor": 0.25, "rope_theta": 10000.0, "attention_bias": False, "attention_dropout": 0.0,
        "tie_word_embeddings": False, "initializer_range": 0.02, "bos_token_id": 1, "eos_token_id": 2,
        "dtype": spec.dtype, "torch_dtype": spec.dtype, "transformers_version": "4.57.0",
    }


def next_config(spec: ModelSpec) -> dict:
    return {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", **_common_config(spec),
            "num_experts": NUM_EXPERTS, "num_experts_per_tok": NUM_EXPERTS, "moe_intermediate_size": spec.intermediate_size,
            "shared_expert_intermediate_size": spec.intermediate_size, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "norm_topk_prob": True}


def qwen35_config(spec: ModelSpec) -> dict:
    return {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", **_common_config(spec)}


def _base(spec: ModelSpec) -> dict:
    h, v = spec.hidden_size, spec.vocab_size
    return {"model.embed_tokens.weight": ((v, h), ("normal", 0.0)), "model.norm.weight": ((h,), ZEROS),
            "lm_head.weight": ((v, h), ("normal", 4.0))}


def _layer_common(p: str, spec: ModelSpec, kind: str, split_gdn: bool) -> dict:
    h = spec.hidden_size
    key_dim = spec.linear_num_key_heads * spec.linear_key_head_dim
    value_dim = spec.linear_num_value_heads * spec.linear_value_head_dim
    nv = spec.linear_num_value_heads
    out = {p + "input_layernorm.weight": ((h,), ZEROS), p + "post_attention_layernorm.weight": ((h,), ZEROS)}
    if kind == LINEAR:
        a = p + "linear_attn."
        if split_gdn:
            out[a + "in_proj_qkv.weight"] = ((2 * key_dim + value_dim, h), NORMAL)
            out[a + "in_proj_z.weight"] = ((value_dim, h), NORMAL)
            out[a + "in_proj_b.weight"] = ((nv, h), NORMAL)
            out[a + "in_proj_a.weight"] = ((nv, h), NORMAL)
        else:
            out[a + "in_proj_qkvz.weight"] = ((2 * key_dim + 2 * value_dim, h), NORMAL)
            out[a + "in_proj_ba.weight"] = ((2 * nv, h), NORMAL)
        out[a + "conv1d.weight"] = ((2 * key_dim + value_dim, 1, spec.conv_kernel), NORMAL)
        out[a + "dt_bias"] = ((nv,), dt_bias_init(spec))
        out[a + "A_log"] = ((nv,), ALOG)
        out[a + "norm.weight"] = ((spec.linear_value_head_dim,), ONES)
        out[a + "out_proj.weight"] = ((h, value_dim), ("normal", MIXER_GAIN))
    else:
        a = p + "self_attn."
        out.update(attention_plan(a, h, spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim, q_factor=2))
        out[a + "q_norm.weight"] = ((spec.head_dim,), ZEROS)
        out[a + "k_norm.weight"] = ((spec.head_dim,), ZEROS)
    return out


def next_plan(spec: ModelSpec) -> dict:
    h, i = spec.hidden_size, spec.intermediate_size
    plan = _base(spec)
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        plan[p + "mlp.gate.weight"] = ((NUM_EXPERTS, h), NORMAL)
        plan[p + "mlp.shared_expert_gate.weight"] = ((1, h), NORMAL)
        for e in [*(f"experts.{x}" for x in range(NUM_EXPERTS)), "shared_expert"]:
            plan.update(mlp_plan(f"{p}mlp.{e}.", h, i))
        plan.update(_layer_common(p, spec, kind, split_gdn=False))
    return plan


def qwen35_plan(spec: ModelSpec) -> dict:
    plan = _base(spec)
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        plan.update(mlp_plan(p + "mlp.", spec.hidden_size, spec.intermediate_size))
        plan.update(_layer_common(p, spec, kind, split_gdn=True))
    return plan


QWEN3_NEXT = Family("qwen3_next", "Qwen3NextForCausalLM", (LINEAR, FULL), "gdn", next_config, next_plan,
                    summary="Gated DeltaNet + gated attention, MoE MLPs", attention_kind=FULL)
QWEN3_5 = Family("qwen3_5", "Qwen3_5ForCausalLM", (LINEAR, FULL), "gdn", qwen35_config, qwen35_plan,
                 summary="Gated DeltaNet + gated attention, dense MLPs (text model of Qwen3.5)", attention_kind=FULL)
