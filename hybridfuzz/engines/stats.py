"""vLLM's own counters of a case, for the oracles that must know what the engine did: how many drafts speculative
decoding proposed and how many were accepted, how many times the scheduler preempted a request.

Read from ``LLM.get_metrics()`` (vLLM's Prometheus metrics, kept only with ``disable_log_stats=False``, which
``engine_kwargs`` sets for a case that needs them: ``needs_stats``). Counters add up over an engine's life, so a case's
stats are the difference between the readings before and after its steps (a warm engine runs several cases).
"""
from __future__ import annotations

from typing import Any

from hybridfuzz.trace import StatName

# Our name -> vLLM's metric (v1/metrics/loggers.py), all counters.
METRICS: dict[StatName, str] = {
    "spec_drafts": "vllm:spec_decode_num_drafts",
    "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
    "preemptions": "vllm:num_preemptions",
}


def needs_stats(engine: Any) -> bool:
    """A case whose oracles read vLLM's counters: speculative decoding (accepted <= proposed) and KV pressure (the
    preemption count proves the case preempted). ``engine``: an EngineConfig or the exporter's namespace of one."""
    return getattr(engine, "speculative_config", None) is not None or getattr(engine, "num_gpu_blocks_override", None) is not None


def read(llm) -> dict[str, float]:
    """The counters now; {} where this engine keeps none (stats off, or a vLLM without get_metrics)."""
    try:
        metrics = llm.get_metrics()
    except Exception:
        return {}
    by_name = {m.name: m for m in metrics}
    return {ours: float(by_name[name].value) for ours, name in METRICS.items() if hasattr(by_name.get(name), "value")}


def since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """What the counters gained between two readings."""
    return {k: v - before.get(k, 0.0) for k, v in after.items()}
