"""Typed records a run writes and ``report``/``campaign-status`` read: one line per case
(``CaseEvent``), the loop's summary (``RunSummary``), and a finding's state (``FindingState``).

``iter_events(dir)`` is the one reader of events: it covers a ``fuzz`` directory
(DIR/events.jsonl) and a ``campaign`` directory (DIR/workers/<i>/events.jsonl), skips a
line cut by ``kill -9``, and gives every event the worker it came from.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterator, Literal

from hybridfuzz.case import STEP_NAMES, Case, Generate, new_dimensions
from hybridfuzz.model import layer_pattern
from hybridfuzz.oracles.verdict import Status

Phase = Literal["generate", "shrink"]
# Steps by their YAML name (case.STEP_NAMES); files written before the names were unified used class names.
_CLASS_TO_STEP = {cls.__name__: name for cls, name in STEP_NAMES.items()}


class FindingState(str, Enum):
    """Where a signature's finding stands in a campaign."""

    OPEN = "open"  # written; still shrinking, or its worker died (a later worker resumes it)
    REPLAYED = "replayed"  # minimal case replayed on a fresh engine with the same signature: reported
    FLAKY = "flaky"  # did not replay: set aside as <sig>.yaml.flaky
    KNOWN_CLASS = "known-class"  # of a KV-dtype class filed before (findings.KvClass): written as found, not shrunk

    @property
    def done(self) -> bool:
        """No worker will shrink it again."""
        return self is not FindingState.OPEN


@dataclass(frozen=True)
class CaseEvent:
    t: float  # seconds since this loop started (a restarted worker starts again at 0)
    phase: Phase
    status: Status
    signature: str
    kv_cache_dtype: str
    layers: str  # "LF...", "MA...": one letter per layer kind (hybridfuzz.model.layer_pattern)
    prefix_caching: bool | None
    steps: tuple[str, ...]  # YAML step names: generate, sleep, wake_up, reset_prefix_cache
    seconds: float
    wall: float | None = None  # epoch seconds (None in files written before it existed)
    family: str = ""  # model.architecture ("" in files written before it existed)
    graphs: Literal["eager", "graphs", "compiled", ""] = ""  # CUDA graphs: none, without torch.compile, compiled
    session_s: float = 0.0  # wall time of the whole session (persistent mode) this case ran in
    startup_s: float = 0.0  # this case's engine start-up (0: it ran on a warm engine)
    steps_s: float = 0.0  # its steps on the engine (where a session's time goes: start-up, steps, or waiting)
    memory: str = ""  # model.memory, short or long ("" in files written before it existed)
    startup_cpu_s: float = 0.0  # CPU seconds of this case's engine start-up (0: warm engine, or files before it existed)
    cpu_s: float = 0.0  # CPU seconds of its engine process for this case, its start-up included (as seconds' startup)
    backend: str = ""  # engine.attention_backend, "auto" when unset ("" in files written before it existed)
    weights: str = ""  # online weight quantization (engine.extra.quantization), "none" ("" in older files)
    repeat_drift: float | None = None  # largest drift of a repeated request from its first run (None: no repeat)
    # the same over the pairs computed the same way (oracles/consistency.py same_schedule), which are held exact
    exact_drift: float | None = None
    # against the reference engine (oracles/reference.py reference_distance): largest drift before a first flip, and
    # largest flip margin (inf: outside the other's top-k); None: no reference, nothing compared or no flip
    reference_drift: float | None = None
    reference_margin: float | None = None
    # "yes" when a generate step holds a 1-token prompt, which a CUDA-graph runner may serve as a decode batch (the
    # class of 4 real findings of the H200 campaign of 2026-12-04, found there by hand); "" in older files
    one_token_prompt: str = ""
    # the new search dimensions the case used (hybridfuzz/case.py new_dimensions); () in files written before it existed
    dimensions: tuple[str, ...] = ()
    worker: str = ""  # "" for a fuzz directory, else the worker index (set by iter_events)

    @classmethod
    def of(cls, case: Case, status: Status, signature: str, t: float, seconds: float, phase: Phase,
           session_s: float = 0.0, timings: dict | None = None, repeat_drift: float | None = None,
           exact_drift: float | None = None, reference_drift: float | None = None,
           reference_margin: float | None = None) -> CaseEvent:
        e = case.engine
        return cls(t=round(t, 3), phase=phase, status=status, signature=signature, kv_cache_dtype=e.kv_cache_dtype,
                   layers=layer_pattern(case.model.layers),
                   prefix_caching=e.enable_prefix_caching, steps=tuple(STEP_NAMES[type(s)] for s in case.steps),
                   seconds=round(seconds, 3), wall=round(time.time(), 3), family=case.model.architecture,
                   graphs="eager" if e.enforce_eager else ("compiled" if e.torch_compile else "graphs"),
                   session_s=round(session_s, 3), startup_s=round((timings or {}).get("startup_s", 0.0), 3),
                   steps_s=round((timings or {}).get("steps_s", 0.0), 3), memory=case.model.memory,
                   startup_cpu_s=round((timings or {}).get("startup_cpu_s", 0.0), 3),
                   cpu_s=round((timings or {}).get("cpu_s", 0.0), 3), backend=e.attention_backend or "auto",
                   weights=str(e.extra.get("quantization") or "none"), repeat_drift=repeat_drift, exact_drift=exact_drift,
                   reference_drift=reference_drift, reference_margin=reference_margin,
                   one_token_prompt="yes" if any(len(p) == 1 for s in case.steps if isinstance(s, Generate) for p in s.prompts) else "no",
                   dimensions=new_dimensions(case))

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d.pop("worker")
        d["steps"] = list(self.steps)
        d["dimensions"] = list(self.dimensions)
        return json.dumps(d)

    @classmethod
    def from_dict(cls, d: dict, worker: str = "") -> CaseEvent:
        steps = d.get("steps", ())
        if isinstance(steps, str):
            steps = [s for s in steps.split(",") if s]
        return cls(t=float(d.get("t", 0.0)), phase=d.get("phase", "generate"), status=d.get("status", "pass"),
                   signature=d.get("signature") or "", kv_cache_dtype=str(d.get("kv_cache_dtype", "")),
                   layers=str(d.get("layers", "")), prefix_caching=d.get("prefix_caching"),
                   steps=tuple(_CLASS_TO_STEP.get(s, s) for s in steps), seconds=float(d.get("seconds", 0.0)),
                   wall=d.get("wall"), family=str(d.get("family", "")), graphs=d.get("graphs", ""),
                   session_s=float(d.get("session_s", 0.0)), startup_s=float(d.get("startup_s", 0.0)),
                   steps_s=float(d.get("steps_s", 0.0)), memory=str(d.get("memory", "")),
                   startup_cpu_s=float(d.get("startup_cpu_s", 0.0)), cpu_s=float(d.get("cpu_s", 0.0)),
                   backend=str(d.get("backend", "")), weights=str(d.get("weights", "")),
                   repeat_drift=d.get("repeat_drift"), exact_drift=d.get("exact_drift"),
                   reference_drift=d.get("reference_drift"), reference_margin=d.get("reference_margin"),
                   one_token_prompt=str(d.get("one_token_prompt", "")), dimensions=tuple(d.get("dimensions") or ()), worker=worker)


def dimension_counts(events) -> dict[str, int]:
    """Cases per new search dimension over these events, most used first (campaign summaries, fault-bench rows)."""
    from collections import Counter

    return dict(Counter(d for e in events for d in e.dimensions).most_common())


def event_files(run_dir: str) -> list[tuple[str, str]]:
    """(worker, path) of every events.jsonl of a fuzz or campaign directory, workers in index order."""
    out = [("", os.path.join(run_dir, "events.jsonl"))]
    wdirs = glob.glob(os.path.join(run_dir, "workers", "*"))
    for wdir in sorted(wdirs, key=lambda p: (not os.path.basename(p).isdigit(), int(os.path.basename(p)) if os.path.basename(p).isdigit() else 0, p)):
        out.append((os.path.basename(wdir), os.path.join(wdir, "events.jsonl")))
    return [(w, p) for w, p in out if os.path.isfile(p)]


def iter_events(run_dir: str, problems: list[str] | None = None) -> Iterator[CaseEvent]:
    """Every case event of a run directory, file by file in the order written.

    A line that is not a JSON object (the tail cut by ``kill -9``) is skipped and, when
    ``problems`` is given, noted there."""
    for worker, path in event_files(run_dir):
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                    if not isinstance(d, dict):
                        raise ValueError(line)
                    yield CaseEvent.from_dict(d, worker)
                except (ValueError, TypeError):
                    if problems is not None:
                        problems.append(f"{os.path.relpath(path, run_dir)} line {n}: not an event")


@dataclass
class FoundRecord:
    """One reported finding of a fuzz loop run."""

    signature: str
    path: str
    summary: str
    found_s: float
    size: list[int]
    shrink_s: float
    like: str = ""  # a finding of a known class: the ledger bug's id, or the filed case that shows the KV-dtype class


@dataclass
class RunSummary:
    """DIR/summary.json of a ``fuzz`` run (a campaign's DIR/summary.json is its aggregate)."""

    started: str
    budget_s: float
    elapsed_s: float
    cases: int
    findings: int
    time_to_first_finding_s: float | None
    shrink_s: float
    engine: str
    vllm: str
    seed: int
    not_replayed: int = 0
    finding_list: list[FoundRecord] = field(default_factory=list)
    met_while_shrinking: list[FoundRecord] = field(default_factory=list)  # written unshrunk, not replayed (campaign/counting.py Stats)
    known_class: list[FoundRecord] = field(default_factory=list)  # of KV-dtype classes filed before: written, not shrunk
    known_bug: list[FoundRecord] = field(default_factory=list)  # members of ledger bugs (``like`` is the bug id): written, not shrunk
    shrink_share: float = 0.0  # of the wall time, the share spent shrinking
    fault_injected: str = ""
    interrupted: bool = False
    host_lost: bool = False  # stopped early: its engines saw no device (campaign/counting.py host_lost)
    # Throughput (campaign/counting.py throughput): steps, fresh engine starts, per-minute rates, busy engines.
    steps: int = 0
    engine_starts: int = 0
    cases_per_min: float = 0.0
    steps_per_min: float = 0.0
    engine_starts_per_min: float = 0.0
    engine_busy_fraction: float = 0.0
    engine_busy_s: float = 0.0
    references_reused: int = 0
    warm_only: int = 0  # divergences on a warm engine that no fresh engine confirmed
    left_unconfirmed: int = 0  # warm divergences met after the budget ended, written open without confirming them
    histories_deferred: int = 0  # warm histories the background shrinker was given to confirm, for the worker to go on
    # Where the loop's wall time went: waiting on sessions (engines), confirming warm divergences on fresh
    # engines, and the rest (drawing examples, building models, judging, the shrink tail).
    sessions_s: float = 0.0
    confirm_s: float = 0.0
    # CPU seconds (issue #12: a GPU host's engines are CPU-bound): this loop's engine processes (cases, references,
    # controls; their start-ups apart), and this loop's own process (drawing, judging, the background shrinker's thread)
    engine_cpu_s: float = 0.0
    startup_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    refusals: dict[str, int] = field(default_factory=dict)  # the top refusal reasons, with counts
    refused_cases: int = 0
    refusals_predicted: int = 0  # sessions the outcome memory foresaw refused (campaign/outcomes.py): no engine started, not in cases
    known_avoided: int = 0  # cases left out: a bug already found was foreseen to stop their engine (campaign/outcomes.py)
    sleep_checks_finished: int = 0  # sleeps whose memory check other engines disturbed, finished by the host (engines/offline.py)
    engine_ends: dict[str, int] = field(default_factory=dict)  # warm engines given up before their session's end, by why (campaign/counting.py count_engine_ends)
    noise_set_aside: dict[str, int] = field(default_factory=dict)  # passing cases whose differing pairs a control or BATCH_SCALES called noise, by which
    cases_per_engine: int = 1
    shrink: str = "inline"
    # the new search dimensions (case.py new_dimensions): cases per dimension, and cases that used any
    dimensions: dict[str, int] = field(default_factory=dict)
    new_dimension_cases: int = 0
    pin_overrides: str = ""  # the bundle's pin overrides (vllm_facts.PIN_OVERRIDES_ENV), beside ``vllm``

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)
