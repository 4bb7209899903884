"""Jamba: Mamba1 (selective scan, dt/B/C layernorms) and attention layers, MoE every other layer.

Jamba's config has no per-layer list: layer i is attention iff i % attn_layer_period ==
attn_layer_offset, so only periodic patterns exist (``check_layers`` says which). Odd
layers are MoE with two experts, both always routed.
"""
from __future__ import annotations

from hybridfuzz.model.spec import (MIXER_GAIN, NORMAL, ONES, ZEROS, ALOG, Family, ModelSpec, attention_plan, dt_bias_init,
                                   mlp_plan)

NUM_EXPERTS = 2
EXPAND = 2
DT_RANK = 8
HEAD_DIM = 32


def period_offset(layers: tuple[str, ...]) -> tuple[int, int] | None:
    """(attn_layer_period, attn_layer_offset) giving exactly this pattern, or None."""
    n = len(layers)
    for period in range(1, n + 2):
        for offset in range(period):
            if all((i % period == offset) == (k == "attention") for i, k in enumerate(layers)):
                return period, offset
    return None


def config(spec: ModelSpec) -> dict:
    period, offset = period_offset(spec.layers) or (len(spec.layers) + 1, len(spec.layers))
    return {
        "architectures": ["JambaForCausalLM"], "model_type": "jamba",
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads, "attn_layer_period": period, "attn_layer_offset": offset,
        "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": NUM_EXPERTS,
        "num_experts_per_tok": NUM_EXPERTS, "mamba_d_state": spec.ssm_state_size, "mamba_d_conv": spec.conv_kernel,
        "mamba_expand": EXPAND, "mamba_dt_rank": DT_RANK, "mamba_conv_bias": True, "mamba_proj_bias": False,
        "use_mamba_kernels": False, "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i, n_state = spec.hidden_size, spec.vocab_size, spec.intermediate_size, spec.ssm_state_size
    inner = EXPAND * h
    head_dim = h // spec.num_attention_heads
    out = {"model.embed_tokens.weight": ((v, h), ("normal", 0.0)), "model.final_layernorm.weight": ((h,), ONES),
           "lm_head.weight": ((v, h), ("normal", 4.0))}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        out[p + "input_layernorm.weight"] = ((h,), ONES)
        out[p + "pre_ff_layernorm.weight"] = ((h,), ONES)
        if n % 2 == 1:
            out[p + "feed_forward.router.weight"] = ((NUM_EXPERTS, h), NORMAL)
            for e in range(NUM_EXPERTS):
                out.update(mlp_plan(f"{p}feed_forward.experts.{e}.", h, i))
        else:
            out.update(mlp_plan(p + "feed_forward.", h, i))
        if kind == "attention":
            out.update(attention_plan(p + "self_attn.", h, spec.num_attention_heads, spec.num_key_value_heads, head_dim))
            continue
        m = p + "mamba."
        out.update({m + "in_proj.weight": ((2 * inner, h), NORMAL),
                    m + "conv1d.weight": ((inner, 1, spec.conv_kernel), NORMAL), m + "conv1d.bias": ((inner,), ZEROS),
                    m + "x_proj.weight": ((DT_RANK + 2 * n_state, inner), NORMAL),
                    m + "dt_proj.weight": ((inner, DT_RANK), NORMAL), m + "dt_proj.bias": ((inner,), dt_bias_init(spec)),
                    m + "A_log": ((inner, n_state), ALOG), m + "D": ((inner,), ONES),
                    m + "out_proj.weight": ((h, inner), ("normal", MIXER_GAIN)),
                    m + "dt_layernorm.weight": ((DT_RANK,), ONES), m + "b_layernorm.weight": ((n_state,), ONES),
                    m + "c_layernorm.weight": ((n_state,), ONES)})
    return out


def check_layers(layers: tuple[str, ...]) -> str | None:
    if period_offset(layers) is None:
        return "jamba layers must be periodic: attention exactly where i % period == offset (attn_layer_period/offset)"
    return None


JAMBA = Family("jamba", "JambaForCausalLM", ("mamba", "attention"), "mamba1", config, plan, check_layers,
               summary="Mamba1 and attention (periodic), MoE every other layer", attention_kind="attention")
