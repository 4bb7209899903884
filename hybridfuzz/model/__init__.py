"""Tiny hybrid models written from a spec: config.json + seeded safetensors.

Weights are drawn tensor by tensor from a generator seeded by (spec seed, tensor
name), so the same spec gives the same bytes on any machine and any transformers
version; no transformers modelling code is imported (it drags torchvision in).
Model directories are cached under their content hash.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

LINEAR = "linear_attention"
FULL = "full_attention"
LAYER_KINDS = (LINEAR, FULL)
ARCHITECTURES = {"qwen3_next": "Qwen3NextForCausalLM"}
BUILDER_VERSION = 2
NUM_EXPERTS = 2  # bump when the weight recipe changes: it is part of the cache key


@dataclass(frozen=True)
class ModelSpec:
    """What a case needs of its model; every field is in the YAML."""

    layers: tuple[str, ...] = (LINEAR, FULL)
    architecture: str = "qwen3_next"
    hidden_size: int = 128
    vocab_size: int = 512
    intermediate_size: int = 256
    # 2 KV heads x 256 make an attention page as big as a GDN state page at
    # 128-token blocks, so prompts of a few hundred tokens get prefix-cache hits.
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 256
    linear_num_key_heads: int = 1
    linear_num_value_heads: int = 1
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    dtype: str = "bfloat16"
    seed: int = 0

    def content_hash(self) -> str:
        blob = json.dumps({"spec": asdict(self), "builder": BUILDER_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def hf_config(spec: ModelSpec) -> dict:
    """The config.json vLLM reads.

    vLLM's Qwen3-Next needs at least one MoE block; two experts, both always
    routed (top-k = all), keep the MLP cheap and free of routing flips.
    """
    return {
        "architectures": [ARCHITECTURES[spec.architecture]],
        "model_type": spec.architecture,
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": len(spec.layers),
        "layer_types": list(spec.layers),
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "linear_num_key_heads": spec.linear_num_key_heads,
        "linear_num_value_heads": spec.linear_num_value_heads,
        "linear_key_head_dim": spec.linear_key_head_dim,
        "linear_value_head_dim": spec.linear_value_head_dim,
        "linear_conv_kernel_dim": 4,
        "num_experts": NUM_EXPERTS,
        "num_experts_per_tok": NUM_EXPERTS,
        "moe_intermediate_size": spec.intermediate_size,
        "shared_expert_intermediate_size": spec.intermediate_size,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "dtype": spec.dtype,
        "torch_dtype": spec.dtype,
        "transformers_version": "4.57.0",
    }


def tensor_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Checkpoint tensor names and shapes in the Hugging Face Qwen3-Next layout."""
    h, v, i = spec.hidden_size, spec.vocab_size, spec.intermediate_size
    key_dim = spec.linear_num_key_heads * spec.linear_key_head_dim
    value_dim = spec.linear_num_value_heads * spec.linear_value_head_dim
    nv = spec.linear_num_value_heads
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for n, kind in enumerate(spec.layers):
        p = f"model.layers.{n}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "mlp.gate.weight"] = (NUM_EXPERTS, h)
        shapes[p + "mlp.shared_expert_gate.weight"] = (1, h)
        for e in [*(f"experts.{x}" for x in range(NUM_EXPERTS)), "shared_expert"]:
            shapes[p + f"mlp.{e}.gate_proj.weight"] = (i, h)
            shapes[p + f"mlp.{e}.up_proj.weight"] = (i, h)
            shapes[p + f"mlp.{e}.down_proj.weight"] = (h, i)
        if kind == LINEAR:
            a = p + "linear_attn."
            shapes[a + "in_proj_qkvz.weight"] = (2 * key_dim + 2 * value_dim, h)
            shapes[a + "in_proj_ba.weight"] = (2 * nv, h)
            shapes[a + "conv1d.weight"] = (2 * key_dim + value_dim, 1, 4)
            shapes[a + "dt_bias"] = (nv,)
            shapes[a + "A_log"] = (nv,)
            shapes[a + "norm.weight"] = (spec.linear_value_head_dim,)
            shapes[a + "out_proj.weight"] = (h, value_dim)
        else:
            a = p + "self_attn."
            d = spec.head_dim
            shapes[a + "q_proj.weight"] = (spec.num_attention_heads * d * 2, h)
            shapes[a + "k_proj.weight"] = (spec.num_key_value_heads * d, h)
            shapes[a + "v_proj.weight"] = (spec.num_key_value_heads * d, h)
            shapes[a + "o_proj.weight"] = (h, spec.num_attention_heads * d)
            shapes[a + "q_norm.weight"] = (d,)
            shapes[a + "k_norm.weight"] = (d,)
    return shapes


# Output-head gain: with unit-variance hidden states the logit std is about this
# value, which gives top-1 margins of a few nats instead of the near-uniform
# distribution of std-0.02 initialisation (see README, "Tiny models").
HEAD_GAIN = 4.0
# Output projections of the mixing branches, by module name. A GDN branch that
# dominates the residual stream makes recurrent-state corruption visible in the
# logits instead of being averaged away by the MLPs.
BRANCH_GAINS = {"out_proj": float(os.environ.get("HF_GDN_GAIN", "4.0")), "o_proj": 2.0, "down_proj": 0.5}


def make_tensor(name: str, shape: tuple[int, ...], seed: int):
    """One tensor, drawn from its own generator so order and version never matter."""
    import torch

    g = torch.Generator().manual_seed(int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:15], 16))
    if name.endswith(("layernorm.weight", "model.norm.weight", "q_norm.weight", "k_norm.weight")):
        return torch.zeros(shape)  # Qwen3-Next RMSNorm is zero-centred: weight 0 means scale 1
    if name.endswith("linear_attn.norm.weight"):
        return torch.ones(shape)
    if name.endswith("dt_bias"):
        return torch.ones(shape)
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=g).log()
    w = torch.randn(shape, generator=g)
    if name == "model.embed_tokens.weight":
        return w
    if name == "lm_head.weight":
        return w * (HEAD_GAIN / shape[-1] ** 0.5)
    return w * (BRANCH_GAINS.get(name.rsplit(".", 2)[-2], 1.0) / shape[-1] ** 0.5)


def cache_root() -> Path:
    return Path(os.environ.get("HYBRIDFUZZ_CACHE", Path.home() / ".cache" / "hybridfuzz"))


def build_model(spec: ModelSpec, root: Path | None = None) -> Path:
    """Write (once) and return the model directory for spec."""
    import torch
    from safetensors.torch import save_file

    out = (root or cache_root() / "models") / f"{spec.architecture}-{spec.content_hash()}"
    if (out / "model.safetensors").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    dtype = getattr(torch, spec.dtype)
    tensors = {n: make_tensor(n, s, spec.seed).to(dtype).contiguous() for n, s in tensor_shapes(spec).items()}
    save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(hf_config(spec), indent=2, sort_keys=True))
    (tmp / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    (tmp / "hybridfuzz-spec.json").write_text(json.dumps(asdict(spec), indent=2, sort_keys=True))
    try:
        os.rename(tmp, out)  # atomic: a concurrent builder that lost the race keeps its own copy out of the way
    except OSError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out
