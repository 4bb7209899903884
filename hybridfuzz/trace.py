"""What an engine run produced: the input of every oracle. Plain data, JSON round-trip."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

# How a run ended. "rejected": the engine refused the configuration at start-up
# with its own clear error (not a finding). The rest are findings for health.
Outcome = Literal["ok", "rejected", "error", "crash", "timeout"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


# vLLM's own counters a Trace keeps in ``stats`` (engines/stats.py reads them from ``LLM.get_metrics()``).
StatName = Literal["spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "preemptions"]
STAT_NAMES: tuple[StatName, ...] = get_args(StatName)


@dataclass
class ErrorInfo:
    type: str
    message: str
    where: str = ""  # innermost vLLM frame, "file:line in function"
    phase: str = ""  # "config" when configuration-checking code raised it (engines/base.py)

    def one_line(self) -> str:
        msg = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.type}: {msg[:200]}" + (f" (at {self.where})" if self.where else "")


@dataclass
class RequestResult:
    prompt_len: int
    tokens: list[int]
    # per generated position: [[token_id, logprob], ...] best first (top-k plus the sampled token)
    logprobs: list[list[list[float]]]
    num_cached_tokens: int | None = None
    # Requests left in flight (a ``submit`` step): how they ended, e.g. length, abort, queued (still waiting for
    # a wake-up when the case ended), error: HTTP500 ... None for an ordinary generate.
    finish_reason: str | None = None
    # n > 1: every sample's tokens, the first being ``tokens`` (None: one sample)
    samples: list[list[int]] | None = None
    # prompt_logprobs: per prompt position after the first, [[token_id, logprob], ...] best first (None: not asked)
    prompt_logprobs: list[list[list[float]]] | None = None


@dataclass
class StepResult:
    index: int
    kind: str
    seconds: float = 0.0
    outputs: list[RequestResult] = field(default_factory=list)
    error: ErrorInfo | None = None


@dataclass
class Trace:
    outcome: Outcome = "ok"
    steps: list[StepResult] = field(default_factory=list)
    error: ErrorInfo | None = None  # start-up error, crash or timeout description
    engine_settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    log_tail: str = ""
    # Persistent mode (engines/offline.py EngineRun): how many cases this engine ran before
    # this one, and the steps the host ran between them (e.g. wake_up, reset_prefix_cache).
    warm_cases: int = 0
    prelude: list[str] = field(default_factory=list)
    # vLLM's own counters over this case's steps (engines/stats.py): spec-decode drafts, draft tokens, accepted tokens,
    # preemptions. Empty where the engine kept no stats (only cases with a feature that needs them ask for them).
    stats: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        def err(e):
            return ErrorInfo(**e) if e else None

        steps = [
            StepResult(
                index=s["index"], kind=s["kind"], seconds=s.get("seconds", 0.0), error=err(s.get("error")),
                outputs=[RequestResult(**o) for o in s.get("outputs", [])],
            )
            for s in d.get("steps", [])
        ]
        return cls(outcome=d["outcome"], steps=steps, error=err(d.get("error")), engine_settings=d.get("engine_settings", {}),
                   timings=d.get("timings", {}), env=d.get("env", {}), log_tail=d.get("log_tail", ""),
                   warm_cases=d.get("warm_cases", 0), prelude=list(d.get("prelude", [])),
                   stats=dict(d.get("stats", {})))

    def generate_results(self) -> list[tuple[int, list[RequestResult]]]:
        return [(s.index, s.outputs) for s in self.steps if s.kind == "generate" and s.error is None]
