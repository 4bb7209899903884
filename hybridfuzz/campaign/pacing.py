"""Pacing a fuzz run: its deadline, how much of a session fits before it (``SessionPace``), and, with background
shrinking, the batches of sessions Hypothesis draws ahead (``draw_ahead``, ``batch_sessions``)."""
from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass, field
from statistics import median

from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

# Background shrinking: sessions Hypothesis draws at once before engines run them (``Pacing.next_batch``),
# at most DRAW_AHEAD and at most DRAW_AHEAD_CASES cases in all (drawing costs about 11 ms a case, see there).
DRAW_AHEAD = 100
DRAW_AHEAD_CASES = 2400
FIRST_BATCH_SESSIONS = 3  # a worker's first batch (batch_sessions): its engines start sooner
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


class Pacing:
    """A run's deadline (``stop()`` moves it to now), what of a session fits before it, and the batches drawn ahead."""

    def __init__(self, deadline: float, cases_per_session: int):
        self.deadline = deadline
        self.cases_per_session = cases_per_session
        self.pace = SessionPace()
        self.batches_drawn = 0  # batches of sessions drawn ahead so far (next_batch)

    def check(self) -> None:
        """BudgetSpent once the deadline has passed."""
        if time.time() > self.deadline:
            raise BudgetSpent()

    def spent(self) -> bool:
        return time.time() >= self.deadline

    def fit(self, session: list) -> list:
        """The cases of a generated session that fit before the deadline; BudgetSpent when not even one does."""
        fits = self.pace.fitting(len(session), self.deadline - time.time())
        if not fits:
            raise BudgetSpent()
        return session[:fits]

    def record(self, wall_s: float, results: list) -> None:
        """A generated session that ran: its wall time, its engine's start-up, its cases."""
        self.pace.record(wall_s, max((r.trace.timings.get("startup_s", 0.0) for r in results), default=0.0), len(results))

    def stop(self) -> None:
        self.deadline = 0.0

    def next_batch(self, strategy, run_seed: int) -> list:
        """Background shrinking: the next batch of sessions, drawn by Hypothesis before engines run them, shuffled.

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
        first = not self.batches_drawn
        n = batch_sessions(self.batches_drawn, self.cases_per_session)
        self.batches_drawn += 1
        return draw_ahead(strategy, run_seed, n + first, skip_simplest=first)
