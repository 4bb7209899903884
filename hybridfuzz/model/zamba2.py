"""Zamba2: a Mamba2 mixer in every layer; ``hybrid`` layers first run a shared attention block.

A hybrid layer concatenates its input with the original embeddings (2 x hidden), runs the
shared transformer block on that (attention, then a gelu MLP; LoRA-style adapters per hybrid
layer on q/k/v and the MLP's gate/up), projects the block's output with its own ``linear``
and adds it to the input of its Mamba2 layer. vLLM reads the pattern from
``layers_block_type`` ("mamba" / "hybrid"; transformers 5 renames "mamba" to
"linear_attention") and derives ``hybrid_layer_ids`` from it; the blocks are cycled over the
hybrid layers, so with ``num_mem_blocks`` b the k-th hybrid layer uses block k % b and its
weights are written once, under the first layer that uses them (as a Hugging Face
checkpoint ties them). Here b is 1 for up to two hybrid layers (both share one block) and
2 beyond (blocks shared every other hybrid layer), so a pattern decides everything.

The attention has as many KV heads as query heads (vLLM's Zamba2Attention has no GQA) and
head_dim 2 x hidden / heads; vLLM always ties the output head to the embedding (as LFM2),
so the embedding carries the head gain.
"""
from __future__ import annotations

from hybridfuzz.model.spec import (ATTENTION_GAIN, HEAD_GAIN, MAMBA2_HEAD_DIM, MAMBA2_HEADS, MLP_GAIN, NORMAL, ONES,
                                   Family, ModelSpec, mamba2_plan)

KINDS = ("mamba", "hybrid")
ADAPTER_RANK = 8


def num_mem_blocks(layers: tuple[str, ...]) -> int:
    """Shared attention blocks: one for up to two hybrid layers, two beyond."""
    return 1 if sum(k == "hybrid" for k in layers) <= 2 else 2


def config(spec: ModelSpec) -> dict:
    h = spec.hidden_size
    return {
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
        "vocab_size": spec.vocab_size, "hidden_size": h, "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers), "layers_block_type": list(spec.layers),
        "num_attention_heads": spec.num_attention_heads, "num_key_value_heads": spec.num_attention_heads,
        "num_mem_blocks": num_mem_blocks(spec.layers), "use_shared_attention_adapter": True,
        "adapter_rank": ADAPTER_RANK, "use_mem_rope": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "mamba_d_state": spec.ssm_state_size, "mamba_d_conv": spec.conv_kernel, "mamba_expand": 2,
        "mamba_ngroups": 1, "n_mamba_heads": MAMBA2_HEADS, "use_conv_bias": True, "add_bias_linear": False,
        "chunk_size": 128, "hidden_act": "gelu", "rms_norm_eps": 1e-5, "max_position_embeddings": 4096,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "dtype": spec.dtype, "torch_dtype": spec.dtype,
    }


def plan(spec: ModelSpec) -> dict:
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    assert 2 * h == MAMBA2_HEADS * MAMBA2_HEAD_DIM  # mamba_expand 2 x hidden = 4 heads of 64
    a = 2 * h  # attention_hidden_size: the block reads [hidden, embeddings]
    hybrid_ids = [n for n, k in enumerate(spec.layers) if k == "hybrid"]
    blocks = num_mem_blocks(spec.layers)
    # Zamba2ForCausalLM ties lm_head to the embedding: no lm_head tensor, the embedding has the head gain.
    out = {"model.embed_tokens.weight": ((v, h), ("normal", HEAD_GAIN)), "model.final_layernorm.weight": ((h,), ONES)}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        if kind == "mamba":
            out[p + "input_layernorm.weight"] = ((h,), ONES)
            out.update(mamba2_plan(p + "mamba.", spec))
            continue
        # The block's output (its MLP's) enters the Mamba input at about the attention-output scale.
        out[p + "linear.weight"] = ((h, h), ("normal", ATTENTION_GAIN / MLP_GAIN))
        out[p + "mamba_decoder.input_layernorm.weight"] = ((h,), ONES)
        out.update(mamba2_plan(p + "mamba_decoder.mamba.", spec))
        k = hybrid_ids.index(n)
        if k >= blocks:
            continue  # this layer reuses block k % blocks, written under an earlier layer
        t = p + "shared_transformer."
        out[t + "input_layernorm.weight"] = ((a,), ONES)
        out[t + "pre_ff_layernorm.weight"] = ((h,), ONES)
        for proj in ("q_proj", "k_proj", "v_proj"):
            out[f"{t}self_attn.{proj}.weight"] = ((a, a), NORMAL)
        out[t + "self_attn.o_proj.weight"] = ((h, a), ("normal", ATTENTION_GAIN))
        out[t + "feed_forward.gate_up_proj.weight"] = ((2 * i, h), NORMAL)
        out[t + "feed_forward.down_proj.weight"] = ((h, i), ("normal", MLP_GAIN))
        # Adapters (LoRA A = .0, B = .1) of this block, one per hybrid layer that uses it.
        for j in range(len(hybrid_ids)):
            if j % blocks != k:
                continue
            for proj in ("linear_q_adapter_list", "linear_k_adapter_list", "linear_v_adapter_list"):
                out[f"{t}self_attn.{proj}.{j}.0.weight"] = ((ADAPTER_RANK, a), NORMAL)
                out[f"{t}self_attn.{proj}.{j}.1.weight"] = ((a, ADAPTER_RANK), NORMAL)
            out[f"{t}feed_forward.gate_up_proj_adapter_list.{j}.0.weight"] = ((ADAPTER_RANK, h), NORMAL)
            out[f"{t}feed_forward.gate_up_proj_adapter_list.{j}.1.weight"] = ((2 * i, ADAPTER_RANK), NORMAL)
    return out


ZAMBA2 = Family("zamba2", "Zamba2ForCausalLM", KINDS, "mamba2", config, plan,
                summary="Mamba2 in every layer; hybrid layers add a shared attention block (weights tied across layers)")
