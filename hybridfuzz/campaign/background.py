"""Keep searching while shrinking: new findings are shrunk on spare engines, in a thread of
their own with its own engine host, while the fuzz loop goes on generating (GPU default).

Each finding is shrunk by the delta-debugging shrinker (``hybridfuzz.triage.shrink``: several
variants at once), written atomically after every improvement, then replayed once on a
fresh engine; ``on_done`` hears whether it replayed. A job to ``confirm`` (a warm engine's history that no fresh
engine has run yet) is replayed first, and shrunk only when that replay shows its signature. With ``slots``, a job waits for one of the
host's shrink slots (campaign/slots.py) first. ``close()`` cuts a shrink short at the
end of the budget: what is on disk is the smallest case found so far, and it is still
replayed before it counts; a job begun after it is only replayed (in the H200 campaign of
2026-12-03 that confirmed 36 findings on fresh engines in the two minutes after the budget,
results/2026-12-03-h200-vllm0.32.0-default-campaign/). Crashes, errors and NaNs go first: with two shrink slots a
host, the three findings shrunk in that campaign were two start-up errors of known classes and
a drift that was most likely noise. Then one finding of each KV dtype before a second of any, and
within that one of each oracle kind: in the next campaign (0.33.0, results/2026-12-03-h200-vllm0.33.0-default-campaign/)
no shrink finished in 660 s, and of the 36 findings 13 were one bug class (per-token-head KV dtypes),
so in the order found a class got its second shrink before another class its first.
"""
from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from hybridfuzz.campaign.slots import ShrinkSlots
from hybridfuzz.case import Case, device_kind, dump_case, load_case_file
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import replay
from hybridfuzz.oracles.health import decided_alone, startup_timeout
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import replayed
from hybridfuzz.triage.reproduce import recorded_rate, shrink_tries
from hybridfuzz.triage.shrink import shrink


@dataclass(frozen=True)
class ShrinkJob:
    signature: str
    path: str
    confirm: bool = False  # not yet seen on a fresh engine: replay it first, and shrink only what reproduces


@dataclass(frozen=True)
class ShrinkOutcome:
    signature: str
    path: str
    case: Case
    replays: bool
    shrink_s: float
    engine_runs: int
    finished: bool  # False: the budget ended (or a variant went unjudged) before the shrinker found nothing smaller


def priority(signature: str) -> int:
    """Lower runs first: the health oracle's findings (a crash, an error, a hang, a NaN: never rounding), then
    wrong outputs, whose tolerance may be the thing at fault."""
    return 0 if signature.startswith("health:") else 1


def kind(signature: str, path: str) -> tuple[str, str]:
    """What makes two findings likely one bug: the case's KV dtype (each bug class found so far lived in one KV
    layout) and the oracle's kind (the signature without its hash). An unreadable file has no dtype: the job fails
    later, when it is taken, and says why there."""
    try:
        dtype = load_case_file(path).engine.kv_cache_dtype
    except Exception:
        dtype = ""
    return dtype, signature.rsplit(":", 1)[0]


_LAST = 2  # the queue's end-of-work marker sorts after every job


@dataclass(frozen=True)
class _Waiting:
    first: int  # ``priority``, or _LAST for the end marker
    order: int  # submitted as the order-th
    dtype: str
    oracle_kind: str
    job: ShrinkJob | None


class JobQueue:
    """The shrinker's waiting jobs, taken in ``priority`` order, then the fewest already taken of the job's KV dtype,
    then of its oracle kind (``kind``), then first come first served: counted when taken, so a class's second shrink
    waits for every other class's first whenever they were found."""

    def __init__(self):
        self._waiting: list[_Waiting] = []
        self._taken_dtypes: Counter[str] = Counter()
        self._taken_kinds: Counter[str] = Counter()
        self._submitted = itertools.count()
        self._ready = threading.Condition()

    def put(self, job: ShrinkJob | None) -> None:
        dtype, oracle_kind = kind(job.signature, job.path) if job else ("", "")
        waiting = _Waiting(_LAST if job is None else priority(job.signature), next(self._submitted), dtype, oracle_kind, job)
        with self._ready:
            self._waiting.append(waiting)
            self._ready.notify()

    def get(self) -> ShrinkJob | None:
        with self._ready:
            self._ready.wait_for(lambda: self._waiting)
            best = min(self._waiting, key=lambda w: (w.first, self._taken_dtypes[w.dtype], self._taken_kinds[w.oracle_kind], w.order))
            self._waiting.remove(best)
            self._taken_dtypes[best.dtype] += 1
            self._taken_kinds[best.oracle_kind] += 1
            return best.job


class BackgroundShrinker:
    def __init__(self, make_host: Callable[[], Host], parallel: int, budget_s: float, timeout_s: float,
                 on_done: Callable[[ShrinkOutcome], None], log: Callable[[str], None] = lambda line: None,
                 slots: ShrinkSlots | None = None):
        self._make_host = make_host
        self.parallel = parallel
        self.budget_s = budget_s
        self.timeout_s = timeout_s
        self.on_done = on_done
        self.log = log
        self.slots = slots  # shared with the other workers of the host (None: shrink at once)
        self._jobs = JobQueue()
        self.deadline = float("inf")  # no shrink runs past it (the loop sets its budget end plus a grace)
        self._thread = threading.Thread(target=self._work, name="hybridfuzz-shrinker", daemon=True)
        self._started = False
        self.busy_s = 0.0
        self.pending = 0

    def submit(self, signature: str, path: str, confirm: bool = False) -> None:
        if not self._started:
            self._started = True
            self._thread.start()
        self.pending += 1
        self._put(ShrinkJob(signature, path, confirm))

    def _put(self, job: ShrinkJob | None) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        host = self._make_host()
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                try:
                    with self.slots.hold(self.deadline) if self.slots else contextlib.nullcontext():
                        self._shrink(job, host)
                except Exception as e:
                    # A host that died (a fork server that would not restart) or an unreadable file ended this
                    # thread before (H200, 2026-12-01) and every later finding of the worker went unshrunk.
                    # The finding stays on disk, open: a later run takes it up. The next job gets a fresh host.
                    self.log(f"shrink {job.signature}: {type(e).__name__}: {e}; left open")
                    host.close()
                    host = self._make_host()
                finally:
                    self.pending -= 1
        finally:
            host.close()

    def _shrink(self, job: ShrinkJob, host: Host) -> None:
        t0 = time.time()
        case = load_case_file(job.path)
        observed = case.observed

        def keep(smaller: Case, verdict, why: str, path=job.path, observed=observed) -> None:
            write_atomic(path, dump_case(smaller.replace(observed=observed)))

        alone = bool(observed) and decided_alone(job.signature, observed[-1].summary)
        seen: list[str] = []  # the signatures of fresh runs made here, for the tries below
        # a warm engine's finding, or a start-up timeout (a loaded host makes those too): confirmed before it is shrunk
        if job.confirm or (bool(observed) and startup_timeout(job.signature, observed[-1].summary)):
            first = replay(case.replace(observed=[]), host, self.timeout_s, alone=alone)
            seen.append(first.verdict.signature)
            if first.verdict.signature != job.signature:  # not confirmed: kept, as flaky, with what the replay saw
                unconfirmed, _ = replayed(case, first, job.signature)
                self.busy_s += time.time() - t0
                self.on_done(ShrinkOutcome(job.signature, job.path, unconfirmed, False, round(time.time() - t0, 1),
                                           1 + (first.reference is not None), True))
                return
        budget = max(0.0, min(self.budget_s, self.deadline - time.time()))
        # the CLI's rule (reproduce.recorded_rate): a finding taken up again from an earlier run records how often it
        # showed, and one that showed in half its runs would lose half the simplifications that keep it if judged once
        hits, runs = recorded_rate(case, job.signature, device_kind(observed[-1].device) if observed else "cpu", seen)
        tries = shrink_tries(hits, runs)
        self.log(f"{job.signature}: shrinking, {budget:.0f} s budget"
                 + (f", {tries} tries a batch ({hits} of {runs} runs recorded)" if tries > 1 else ""))
        result = shrink(case.replace(observed=[]), job.signature, host, budget, self.parallel * (2 if alone else 1),
                        self.timeout_s, on_smaller=keep, log=lambda line: self.log(f"{job.signature}: {line.strip()}"),
                        alone=alone, tries=tries)
        minimal = load_case_file(job.path)
        again = replay(minimal.replace(observed=[]), host, self.timeout_s, alone=alone)
        minimal, replays = replayed(minimal, again, job.signature)
        self.busy_s += time.time() - t0
        self.log(f"{job.signature}: {'finished' if result.finished else 'cut short'} after {result.seconds:.0f} s"
                 f"{'' if result.finished else ' (' + result.stopped + ')'}, "
                 f"{len(result.accepted)} kept, {result.runs} engine runs; replay {'shows it' if replays else 'does not'}")
        self.on_done(ShrinkOutcome(job.signature, job.path, minimal, replays, round(time.time() - t0, 1), result.runs,
                                   result.finished))

    def close(self, deadline: float) -> None:
        """Finish the queue by ``deadline`` (shrinks are cut short to fit), then stop."""
        if not self._started:
            return
        self.deadline = min(self.deadline, deadline)
        self._put(None)
        self._thread.join()
