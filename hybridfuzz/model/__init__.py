"""Tiny hybrid models written from a spec: config.json + seeded safetensors, one module per family.

Weights are drawn tensor by tensor from a generator seeded by (spec seed, tensor
name), so the same spec gives the same bytes on any machine and any transformers
version; no transformers modelling code is imported (it drags torchvision in).
Model directories are cached under a hash of what is written (config, tensor plan,
seed, dtype). Each family (``FAMILIES``) says how a spec becomes its config.json and
its checkpoint layout; the gains that give ~1 nat top-1 margins are in ``spec.py``.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

from hybridfuzz.model.falcon_h1 import FALCON_H1
from hybridfuzz.model.granitemoehybrid import GRANITEMOEHYBRID
from hybridfuzz.model.jamba import JAMBA
from hybridfuzz.model.lfm2 import LFM2
from hybridfuzz.model.nemotron_h import NEMOTRON_H
from hybridfuzz.model.qwen3_next import QWEN3_5, QWEN3_NEXT
from hybridfuzz.model.spec import FULL, LINEAR, RECURRENT_KINDS, Family, Init, ModelSpec, layer_pattern
from hybridfuzz.model.zamba2 import ZAMBA2

__all__ = ["FAMILIES", "FULL", "LAYER_KINDS", "LINEAR", "Family", "ModelSpec", "attention_control", "build_model", "check_spec",
           "content_hash", "hf_config", "layer_pattern", "make_tensor", "tensor_plan", "tensor_shapes"]

# Every family the builder writes, simplest first (strategies shrink toward the first).
FAMILIES: dict[str, Family] = {f.name: f for f in (QWEN3_NEXT, QWEN3_5, NEMOTRON_H, GRANITEMOEHYBRID, FALCON_H1,
                                                   LFM2, JAMBA, ZAMBA2)}
# The layer kinds of the default family (schema v1 cases: linear_attention / full_attention).
LAYER_KINDS = QWEN3_NEXT.layer_kinds
ARCHITECTURES = {name: f.architecture for name, f in FAMILIES.items()}
BUILDER_VERSION = 3  # bump when make_tensor changes: it is part of the cache key
MAX_LAYERS = 8


def check_spec(spec: ModelSpec) -> tuple[str, str] | None:
    """The family rules for a spec: (field, one-line reason) of the first problem, or None."""
    family = FAMILIES.get(spec.architecture)
    if family is None:
        return "architecture", f"unknown architecture {spec.architecture!r:.40} (known: {', '.join(FAMILIES)})"
    if not 1 <= len(spec.layers) <= MAX_LAYERS:
        return "layers", f"needs 1 to {MAX_LAYERS} layers, got {len(spec.layers)}"
    for i, kind in enumerate(spec.layers):
        if kind not in family.layer_kinds:
            return f"layers[{i}]", f"{family.name} layers are {' or '.join(family.layer_kinds)}; got {kind!r:.40}"
    reason = family.check_layers(tuple(spec.layers))
    if reason:
        return "layers", reason
    if spec.conv_kernel not in family.conv_kernels:
        return "conv_kernel", f"{family.name} takes {', '.join(map(str, family.conv_kernels))}; got {spec.conv_kernel}"
    if spec.ssm_state_size not in (16, 32, 64, 128):
        return "ssm_state_size", f"must be 16, 32, 64 or 128; got {spec.ssm_state_size}"
    if spec.memory != "short" and not family.has_state_decay:
        return "memory", f"{family.name}'s short convolution has no state decay; memory must be short"
    return None


def hf_config(spec: ModelSpec) -> dict:
    """The config.json vLLM reads (the family's real model class is its ``architectures``)."""
    return FAMILIES[spec.architecture].config(spec)


def tensor_plan(spec: ModelSpec) -> dict[str, tuple[tuple[int, ...], Init]]:
    """Checkpoint tensor name -> (shape, how make_tensor draws it), in the family's checkpoint layout."""
    return FAMILIES[spec.architecture].plan(spec)


def tensor_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    return {name: shape for name, (shape, _) in tensor_plan(spec).items()}


def make_tensor(name: str, shape: tuple[int, ...], seed: int, init: Init = ("normal", 1.0)):
    """One tensor, drawn from its own generator so order and version never matter.

    ("normal", g): N(0, 1) * g / sqrt(shape[-1]), or plain N(0, 1) for g == 0 (embeddings);
    "alog": log of U(1, 16), the SSM decay init; "dt_long": a long-memory dt bias; "zeros" / "ones": constants.
    """
    import torch

    kind, gain = init
    if kind == "zeros":
        return torch.zeros(shape)
    if kind == "ones":
        return torch.ones(shape)
    g = torch.Generator().manual_seed(int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:15], 16))
    if kind == "alog":
        return torch.empty(shape).uniform_(1.0, 16.0, generator=g).log()
    if kind == "dt_long":
        dt = torch.empty(shape).uniform_(math.log(1e-3), math.log(1e-2), generator=g).exp()
        return dt + torch.log(-torch.expm1(-dt))  # softplus^-1(dt)
    w = torch.randn(shape, generator=g)
    return w if gain == 0 else w * (gain / shape[-1] ** 0.5)


def attention_control(spec: ModelSpec) -> ModelSpec | None:
    """The same model with every recurrent layer replaced by the family's attention layer: same sizes, seed,
    prompts and engine, no recurrent state. What it does on a schedule (batch shape, chunking, a cache hit) is
    the engine's schedule noise; None where the family has no attention layer of its own or rejects the
    pattern (jamba's period rule)."""
    family = FAMILIES.get(spec.architecture)
    if family is None or family.attention_kind is None:
        return None
    layers = tuple(family.attention_kind if kind in RECURRENT_KINDS else kind for kind in spec.layers)
    control = replace(spec, layers=layers)
    return control if check_spec(control) is None else None


def content_hash(spec: ModelSpec) -> str:
    """Key of the model directory: everything that decides its bytes."""
    plan = sorted((n, list(s), list(i)) for n, (s, i) in tensor_plan(spec).items())
    blob = json.dumps({"config": hf_config(spec), "plan": plan, "seed": spec.seed, "dtype": spec.dtype,
                       "builder": BUILDER_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("HYBRIDFUZZ_CACHE", Path.home() / ".cache" / "hybridfuzz"))


def build_model(spec: ModelSpec, root: Path | None = None) -> Path:
    """Write (once) and return the model directory for spec."""
    import torch
    from safetensors.torch import save_file

    out = (root or cache_root() / "models") / f"{spec.architecture}-{content_hash(spec)}"
    if (out / "model.safetensors").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".build-"))
    dtype = getattr(torch, spec.dtype)
    tensors = {n: make_tensor(n, s, spec.seed, init).to(dtype).contiguous() for n, (s, init) in tensor_plan(spec).items()}
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
