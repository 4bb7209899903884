"""Mends: candidate upstream fixes applied inside the engine, for the decisive replay of a triage.

``HYBRIDFUZZ_MEND=name[,name...]`` in the environment of a hybridfuzz command (``HYBRIDFUZZ_MEND=scale-fill
hybridfuzz replay CASE``) reaches every engine process, where the same vLLM plugin as the faults
(``hybridfuzz.faults.register``) applies the named mends before the engine is built. A finding that diverges without
the mend and passes with it is explained by the code the mend changes: what a triage read in vLLM's source becomes
a measured fact, and a line for the upstream report. Without the variable nothing is imported or changed. Each mend
wraps the vLLM function it fixes (never a copy of it) and names the upstream change it stands for.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

ENV = "HYBRIDFUZZ_MEND"


class MendError(ValueError):
    """One line naming the offending part of HYBRIDFUZZ_MEND."""


@dataclass(frozen=True)
class Mend:
    name: str
    upstream: str  # the fix it stands for
    apply: Callable[[], None]
    in_place: Callable[[], bool]  # whether this process's vLLM runs the mended code now (the plugin applied it)


def _mark(fn: Callable) -> Callable:
    """A mended method, marked so that a second apply leaves it be and ``in_place`` can tell it from vLLM's own."""
    fn._hybridfuzz_mend = True  # type: ignore[attr-defined]
    return fn


def _mended(fn: Callable) -> bool:
    return bool(getattr(fn, "_hybridfuzz_mend", False))


def _no_scale_fill() -> None:
    """TritonAttentionImpl._ensure_scale_caches without its two ``fill_(1.0)`` calls: the views are made as before,
    and whatever the pages hold stays (the scales of written slots are written with their K/V)."""
    import torch
    from vllm.v1.attention.backends.triton_attn import TritonAttentionImpl

    original = TritonAttentionImpl._ensure_scale_caches
    if _mended(original):
        return

    @functools.wraps(original)
    def ensure_scale_caches(self, kv_cache):
        fill = torch.Tensor.fill_
        torch.Tensor.fill_ = lambda t, *args, **kwargs: t  # the method's only writes; its views are what it exists for
        try:
            return original(self, kv_cache)
        finally:
            torch.Tensor.fill_ = fill

    TritonAttentionImpl._ensure_scale_caches = _mark(ensure_scale_caches)


def _scale_fill_in_place() -> bool:
    from vllm.v1.attention.backends.triton_attn import TritonAttentionImpl

    return _mended(TritonAttentionImpl._ensure_scale_caches)


def _eager_prefills() -> None:
    """GPUModelRunner._determine_batch_execution_and_padding with ``force_eager`` for a batch in which a request still
    prefills (fewer tokens computed than its prompt has). A one-token prompt, or the last prompt token after a
    prefix-cache hit, makes a batch of one token per request, which the graph dispatcher replays as a FULL decode
    graph; the Mamba metadata builder keeps it a prefill and copies state slots into the graph's buffers only for
    decodes (vLLM 0.33.0 mamba_attn.py ``_update_metadata_for_cudagraph_capture``), so the graph would read another
    request's or the capture's state. Graph capture (``force_uniform_decode`` given) is left as it is."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner._determine_batch_execution_and_padding
    if _mended(original):
        return

    @functools.wraps(original)
    def determine(self, num_tokens, num_reqs, *args, **kwargs):
        batch = self.input_batch
        if kwargs.get("force_uniform_decode") is None and num_reqs and (
                batch.num_computed_tokens_cpu[:num_reqs] < batch.num_prompt_tokens[:num_reqs]).any():
            kwargs["force_eager"] = True
        return original(self, num_tokens, num_reqs, *args, **kwargs)

    GPUModelRunner._determine_batch_execution_and_padding = _mark(determine)


def _eager_prefills_in_place() -> bool:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    return _mended(GPUModelRunner._determine_batch_execution_and_padding)


MENDS: dict[str, Mend] = {m.name: m for m in (
    Mend("scale-fill", "seed 1 (../shared/seeds/): vLLM PR #56492 removes the two fill_(1.0) of "
                       "TritonAttentionImpl._ensure_scale_caches, which overwrite recurrent state in pages shared with "
                       "per-token-head KV (int8/int4/fp8_per_token_head on TRITON_ATTN)", _no_scale_fill, _scale_fill_in_place),
    Mend("prefill-eager", "no upstream change yet: a candidate from reading vLLM 0.33.0 (results/2026-12-04-h200-vllm0.33.0-int8-triage/"
                          "README.md): batches with a prefilling request run eagerly, not as the FULL decode graph that "
                          "reads stale Mamba state slots", _eager_prefills, _eager_prefills_in_place),
)}


def parse(text: str) -> list[Mend]:
    """The mends HYBRIDFUZZ_MEND names, in order; MendError (one line) for an unknown one."""
    out = []
    for name in (p.strip() for p in text.split(",")):
        if not name:
            continue
        if name not in MENDS:
            raise MendError(f"{ENV}: unknown mend {name!r} (known: {', '.join(MENDS)})")
        out.append(MENDS[name])
    return out


def chosen() -> list[Mend]:
    return parse(os.environ.get(ENV, ""))


def in_place() -> list[str]:
    """The chosen mends this process runs, checked on vLLM's own classes after the engine is built: the evidence that
    a replay with HYBRIDFUZZ_MEND ran the mended code (on the H200, 2026-12-04, three per-token-head findings still
    diverged with the mend, and only the variable was on record)."""
    return [m.name for m in chosen() if m.in_place()]


def activate() -> list[str]:
    """Apply the mends the environment names (in an engine process, through the plugin); their names."""
    mends = chosen()
    for m in mends:
        m.apply()
    return [m.name for m in mends]
