"""NemotronH: one block kind per layer (Mamba2, attention or MLP), in any order.

vLLM reads the pattern from ``hybrid_override_pattern`` (M = Mamba2, * = attention,
- = MLP). The MLP is NemotronH's squared-ReLU up/down pair; every norm is a plain RMSNorm.
"""
from __future__ import annotations

from hybridfuzz.model.spec import (MAMBA2_HEAD_DIM, MAMBA2_HEADS, MLP_GAIN, NORMAL, ONES, Family,
                                   ModelSpec, attention_plan, mamba2_plan)

SYMBOLS = {"mamba": "M", "attention": "*", "mlp": "-"}


def config(spec: ModelSpec) -> dict:
    return {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "vocab_size": spec.vocab_size, "hidden_size": spec.hidden_size, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "hybrid_override_pattern": "".join(SYMBOLS[k] for k in spec.layers),
        "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim, "attention_bias": False, "mlp_bias": False, "mlp_hidden_act": "relu2",
        "mamba_num_heads": MAMBA2_HEADS, "mamba_head_dim": MAMBA2_HEAD_DIM, "n_groups": 1,
        "ssm_state_size": spec.ssm_state_size, "conv_kernel": spec.conv_kernel, "use_conv_bias": True, "use_bias": False,
        "mamba_hidden_act": "silu", "chunk_size": 128, "expand": 2,
        "layer_norm_epsilon": 1e-5, "residual_in_fp32": False, "rescale_prenorm_residual": True,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0, "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    out = {"model.embeddings.weight": ((v, h), ("normal", 0.0)), "model.norm_f.weight": ((h,), ONES),
           "lm_head.weight": ((v, h), ("normal", 4.0))}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        out[p + "norm.weight"] = ((h,), ONES)
        if kind == "mamba":
            out.update(mamba2_plan(p + "mixer.", spec))
        elif kind == "attention":
            out.update(attention_plan(p + "mixer.", h, spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim))
        else:
            out[p + "mixer.up_proj.weight"] = ((i, h), NORMAL)
            out[p + "mixer.down_proj.weight"] = ((h, i), ("normal", MLP_GAIN))
    return out


def check_layers(layers: tuple[str, ...]) -> str | None:
    return None if "mamba" in layers or "attention" in layers else "needs at least one mamba or attention layer"


NEMOTRON_H = Family("nemotron_h", "NemotronHForCausalLM", tuple(SYMBOLS), "mamba2", config, plan, check_layers,
                    summary="Mamba2, attention and MLP blocks in any order", attention_kind="attention")
