"""Case -> engine host -> Traces -> oracles -> Verdict. The one path every command takes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from hybridfuzz.case import REFERENCE_CHECKS, Case
from hybridfuzz.engines.base import Host
from hybridfuzz.oracles.consistency import ControlKind, check_self_consistency, control_cases, needs_control
from hybridfuzz.oracles.abort import check_abort
from hybridfuzz.oracles.async_scheduling import check_async_scheduling
from hybridfuzz.oracles.health import check_health
from hybridfuzz.oracles.preemption import check_preemption
from hybridfuzz.oracles.sampling import check_n_samples, check_seeded_sampling
from hybridfuzz.oracles.spec_decode import check_spec_decode
from hybridfuzz.oracles.prefix_cache import check_prefix_cache
from hybridfuzz.oracles.reference import check_reference
from hybridfuzz.oracles.verdict import Verdict, combine
from hybridfuzz.trace import Trace


@dataclass
class Result:
    verdict: Verdict
    trace: Trace
    reference: Trace | None = None
    extra: dict = field(default_factory=dict)
    controls: dict[ControlKind, Trace] = field(default_factory=dict)  # control runs, when the verdict needed them


# The feature oracles by check name (docs/dimensions.md): given the reference run (the case without its feature; None
# when there is none), or judged on the case's own run.
FEATURE_CHECKS = {"spec_decode": check_spec_decode, "async_scheduling": check_async_scheduling,
                  "preemption": check_preemption, "abort": check_abort}
OWN_RUN_FEATURE_CHECKS = {"seeded_sampling": check_seeded_sampling, "n_samples": check_n_samples}


def needs_reference(case: Case) -> bool:
    if not any(c in case.oracle.checks for c in REFERENCE_CHECKS):
        return False
    ref = case.reference_case()
    return ref.engine != case.engine or ref.steps != case.steps


def judge(case: Case, trace: Trace, ref: Trace | None, controls: dict[ControlKind, Trace] | None = None) -> Verdict:
    """Pure: apply the case's checks to traces already run (controls: see oracles/consistency.py)."""
    checks = case.oracle.checks
    verdicts = [check_health(trace, case=case)]  # case: the sleep/wake table decides refused protocol calls
    if verdicts[0].status != "pass":
        return verdicts[0]
    if ref is not None:
        v = check_health(ref, label="reference")
        if v.status == "unsupported":
            return v
        if v.status == "divergence":
            v.summary = "reference run failed too: " + v.summary
            return v
    if "self_consistency" in checks:
        verdicts.append(check_self_consistency(case, trace, controls=controls))
    # before the KV-dtype reference: a feature's own oracle names the divergence its reference run shows
    verdicts += [check(case, trace, ref) for name, check in FEATURE_CHECKS.items() if name in checks]
    verdicts += [check(case, trace) for name, check in OWN_RUN_FEATURE_CHECKS.items() if name in checks]
    if "reference" in checks and ref is not None:
        verdicts.append(check_reference(case, trace, ref))
    if "prefix_cache" in checks or "self_consistency" in checks:  # last: a cost finding never hides a correctness one
        verdicts.append(check_prefix_cache(case, trace))
    return combine(verdicts)


class ReferenceCache:
    """Reference runs already made, by their exact input (a reference session's YAML).

    Cases that differ only in what the reference overrides (the KV dtype, by default) share
    one reference run: int8 and fp8 variants of a case, and the shrinker's KV-dtype steps.
    Only clean runs are kept; a bounded LRU, per process.
    """

    def __init__(self, size: int = 256):
        self.size = size
        self._runs: dict[str, list[Trace]] = {}
        self.hits = 0

    @staticmethod
    def key(cases: list[Case]) -> str:
        from hybridfuzz.case import dump_case

        return "\n---\n".join(dump_case(c.replace(observed=[], expect={}, note="")) for c in cases)

    def get(self, cases: list[Case]) -> list[Trace] | None:
        runs = self._runs.get(self.key(cases))
        if runs is not None:
            self.hits += 1
        return runs

    def put(self, cases: list[Case], traces: list[Trace]) -> None:
        if len(traces) == len(cases) and all(t.outcome == "ok" for t in traces):
            self._runs[self.key(cases)] = traces
            while len(self._runs) > self.size:
                self._runs.pop(next(iter(self._runs)))


REFERENCES = ReferenceCache()


def evaluate_sessions(sessions: list[list[Case]], host: Host, timeout: float | None = None,
                      cache: ReferenceCache | None = REFERENCES, known: Callable[[str], bool] | None = None,
                      alone: bool = False) -> list[list[Result]]:
    """Run sessions (cases sharing model and engine; one warm engine each where the host has
    persistent mode) and their reference sessions, all at once; judge every case.

    A case's reference runs in the reference session at the same position, after the same
    history, so warm-engine state is alike on both sides. ``known``: signatures not worth judging
    further (no control run for them, see ``run_controls``). ``alone``: no reference runs, for a
    finding its case's own run decides (oracles/health.py decided_alone; the shrinker's crashes).
    """
    runs: list[list[Case]] = []
    slots: list[tuple[int, int | None, list[int | None]]] = []  # (main run, reference run, position in it)
    cached: dict[int, list[Trace]] = {}
    for cases in sessions:
        main = len(runs)
        runs.append(list(cases))
        wanted = [needs_reference(c) and not alone for c in cases]
        refs = [c.reference_case() for c, w in zip(cases, wanted) if w]
        pos, n = [], 0
        for w in wanted:
            pos.append(n if w else None)
            n += w
        ref = None
        if refs:
            ref = len(runs)
            hit = cache.get(refs) if cache is not None else None
            if hit is not None:
                cached[ref] = hit
            runs.append(refs)
        slots.append((main, ref, pos))
    todo = [i for i in range(len(runs)) if i not in cached]
    position = {run: k for k, run in enumerate(todo)}
    # a reference session is abandoned when its case's engine does not start (engines/forkserver.py run_sessions)
    abandon = {position[ref]: position[main] for main, ref, _ in slots if ref is not None and ref in position}
    traces = dict(zip(todo, host.run_sessions([runs[i] for i in todo], timeout, abandon=abandon)))
    traces.update(cached)
    if cache is not None:
        for i in todo:
            if any(s[1] == i for s in slots):
                cache.put(runs[i], traces[i])
    out = []
    for cases, (main, ref, pos) in zip(sessions, slots):
        results = []
        for case, trace, p in zip(cases, traces[main], pos):
            reference = traces[ref][p] if ref is not None and p is not None and p < len(traces[ref]) else None
            results.append(Result(judge(case, trace, reference), trace, reference))
        out.append(results)
    run_controls(out, sessions, host, timeout, known)
    return out


def run_controls(out: list[list[Result]], sessions: list[list[Case]], host: Host, timeout: float | None,
                  known: Callable[[str], bool] | None = None) -> None:
    """Judge again, with its control runs, every schedule-only self-consistency divergence
    (oracles/consistency.py) whose signature is not ``known``: all sessions' controls at once, each session's
    controls of one kind on one engine (they share its control model and engine). A fresh engine per control made
    a session of a known first-request bug (23 of its 24 cases) take 309 s instead of 21 (H200, vLLM 0.26.0,
    2026-12-01)."""
    runs: list[tuple[ControlKind, list[tuple[Case, Result, Case]]]] = []  # (kind, [(case, its result, its control)])
    for cases, results in zip(sessions, out):
        group = [(c, r, control_cases(c)) for c, r in zip(cases, results) if r.verdict.status == "divergence"
                 and needs_control(c, r.verdict) and not (known is not None and known(r.verdict.signature))]
        for kind in sorted({kind for *_, controls in group for kind in controls}):
            runs.append((kind, [(c, r, controls[kind]) for c, r, controls in group if kind in controls]))
    if not runs:
        return
    traces = host.run_sessions([[control for *_, control in group] for _, group in runs], timeout)
    judged: dict[int, tuple[Case, Result]] = {}
    for (kind, group), session_traces in zip(runs, traces):
        for (case, result, _), trace in zip(group, session_traces):
            result.controls[kind] = trace
            judged[id(result)] = (case, result)
    for case, result in judged.values():
        result.verdict = judge(case, result.trace, result.reference, result.controls)


def evaluate_many(cases: list[Case], host: Host, timeout: float | None = None) -> list[Result]:
    """Each case on its own fresh engine (with its reference), all at once."""
    return [r[0] for r in evaluate_sessions([[c] for c in cases], host, timeout, cache=None)]


def history_case(cases: list[Case], traces: list[Trace], upto: int) -> Case:
    """What a warm engine ran up to and including case ``upto``, as one fresh-engine case:
    every case's steps since that engine started, with the prelude steps the host ran between them
    (wake_up, reset_prefix_cache) written out. The finding of a divergence that needs the history.

    A session whose engine stopped goes on on a fresh one (engines/forkserver.py run_sessions): its history starts
    at that engine's first case (``warm_cases == 0``). A 29-case history of the H200 (2026-12-02, 4e783eaf) held two
    engines, and replayed as written it stopped at the first engine's StillAsleep, never reaching its own case."""
    from hybridfuzz.case import STEP_KINDS

    first = max((i for i in range(upto + 1) if traces[i].warm_cases == 0), default=0)
    steps: list = []
    for i in range(first, upto + 1):
        if i > first:
            steps.extend(STEP_KINDS[name]() for name in traces[i].prelude)
        steps.extend(cases[i].steps)
    last = cases[upto]
    return last.replace(steps=steps, note=(last.note + "; " if last.note else "") +
                        f"the history of a warm engine: {upto + 1 - first} cases run one after another")


def evaluate(case: Case, host: Host, timeout: float | None = None, alone: bool = False) -> Result:
    """Run the case (and its reference, concurrently where the host allows, unless ``alone``) and judge."""
    if case.kind == "component":
        from hybridfuzz.components import run_component

        return Result(run_component(case), Trace(outcome="ok"))
    return evaluate_sessions([[case]], host, timeout, cache=None, alone=alone)[0][0]


def interfered(result: Result) -> bool:
    """Whether the run met a shortage or interference of our harness (failures.py shortage), not the case."""
    from hybridfuzz.failures import shortage

    return any(t is not None and t.outcome == "rejected" and shortage(t.error) for t in (result.trace, result.reference))


# A start-up that timed out is tried once more with this many times the deadline before it counts. On the H200 of
# 2026-12-04 (results/2026-12-04-h200-vllm0.33.0-int8-triage/), 19 replays and shrinks started at once on 16 cores (load 30-37):
# 12 of their first engines, of 7 unrelated cases, met the 300 s deadline while compiling Triton kernels, all with the
# one signature of a start-up timeout (`health:timeout:Timeout:dd27d43b`, found the same way by an H200 campaign earlier that day);
# 6 minutes later, on the warm host, the same cases started in seconds. A hung start-up hangs for any deadline.
STARTUP_RETRY_FACTOR = 2


def startup_timed_out(result: Result) -> bool:
    """Did an engine of this run (the case's or its reference's) time out before its first step?"""
    return any(t is not None and t.outcome == "timeout" and not t.steps for t in (result.trace, result.reference))


def replay(case: Case, host: Host, timeout: float | None = None, tries: int = 3, alone: bool = False,
           startup_retry: bool = True) -> Result:
    """``evaluate`` on a fresh engine, again (up to ``tries`` runs) while our harness interfered: a finding's replay
    beside a campaign's other engines can meet vLLM's device-wide sleep memory check, and a replay that did not
    run the case says nothing about it (the fp8 wake-up crash was set aside as flaky so, 2026-12-01). A start-up
    timeout, once more with STARTUP_RETRY_FACTOR times the deadline (above), unless ``startup_retry`` is off (a
    generating worker confirming a warm divergence: there a start-up timeout only means "not confirmed now", and the
    background shrinker confirms the case later, with the retry). ``alone``: without the reference run, for a finding
    the case's own run decides (oracles/health.py decided_alone)."""
    result = evaluate(case, host, timeout, alone)
    for _ in range(tries - 1):
        if not interfered(result):
            break
        result = evaluate(case, host, timeout, alone)
    if startup_retry and startup_timed_out(result):
        result = evaluate(case, host, STARTUP_RETRY_FACTOR * (timeout or host.timeout), alone)
    return result
