"""Confirming divergences met on a warm engine (persistent mode): a divergence counts only once a fresh engine shows
it, the case alone, else the warm engine's whole history as one case (campaign/loop.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass

from hybridfuzz.campaign.config import FuzzConfig
from hybridfuzz.campaign.counting import Stats, count_case
from hybridfuzz.campaign.filing import FindingWriter
from hybridfuzz.campaign.shrinking import BackgroundHandOff
from hybridfuzz.case import Case
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import Result, history_case, replay
from hybridfuzz.oracles.health import decided_alone

# A warm divergence met at most this long after the budget gets its case alone confirmed on a fresh engine
# (Confirmer.confirm_late): one engine start, median 10.9 s on the H200 of 2026-12-04, inside timed-campaign.sh's grace.
LATE_CONFIRM_S = 60.0


@dataclass(eq=False)
class Confirmer:
    """Runs warm divergences on fresh engines of ``host``. With background shrinking (``background``), a history
    is handed to the shrinker unconfirmed instead of run here."""

    cfg: FuzzConfig
    host: Host
    stats: Stats
    known: set[str]
    writer: FindingWriter
    background: BackgroundHandOff | None

    def confirmed(self, session: list[Case], results: list[Result], i: int, deadline: float) -> tuple[Case, Result] | None:
        """The i-th case of a session that ran and its result, to go on with: as they are when they ran on a fresh
        engine; else what a fresh engine confirmed (``confirm``; ``confirm_late`` once ``deadline`` has passed);
        None when nothing was confirmed here."""
        case, result = session[i], results[i]
        if result.trace.warm_cases and time.time() >= deadline:
            confirmed = self.confirm_late(session, results, i, deadline)
            if confirmed is None:
                return None
            case, result = confirmed
        if result.trace.warm_cases:
            return self.confirm(session, results, i)
        return case, result

    def confirm_late(self, session: list[Case], results: list[Result], i: int, deadline: float) -> tuple[Case, Result] | None:
        """A warm divergence met once the budget is spent: its case alone on one fresh engine while the budget ended
        less than LATE_CONFIRM_S ago (not after the loop's ``stop()``: Ctrl-C, SIGTERM), else, or when the case alone
        does not show it, written open (``leave_unconfirmed``). The 0.33.0 campaign of 2026-12-04 left 4 findings met
        in the 17 s after its budget open, 3 of them real, and the host's time ended before they could be replayed."""
        if time.time() < deadline + LATE_CONFIRM_S:
            t0 = time.time()
            confirmed = self.fresh(session[i], results[i].verdict)
            self.stats.confirm_s += time.time() - t0
            if confirmed is not None:
                return confirmed
        self.leave_unconfirmed(session, results, i)
        return None

    def leave_unconfirmed(self, session: list[Case], results: list[Result], i: int) -> None:
        """A warm divergence met once the budget is spent, after ``stop()`` or too long after the budget, or whose case
        alone did not show it (``confirm_late``): written as an open finding, the warm engine's history as one case,
        with no fresh engine spent confirming the history. Confirming kept workers on for 225-284 s past their last
        session on the H200 of 2026-12-02 (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/), and the campaign past its budget.
        ``hybridfuzz replay`` or ``shrink`` of the file confirms it later."""
        result = results[i]
        sig = result.verdict.signature
        if self.cfg.claim is not None and not self.cfg.claim(sig):
            return
        self.known.add(sig)
        self.stats.left_unconfirmed += 1
        self.writer.write(history_case(session, [r.trace for r in results], i), result,
                          why=f"the history of a warm engine ({i + 1} cases), met after the budget ended: not yet confirmed on a "
                              "fresh engine (hybridfuzz replay confirms it)")

    def confirm(self, session: list[Case], results: list[Result], i: int) -> tuple[Case, Result] | None:
        """A divergence on a warm engine, on a fresh one: the case alone, else the engine's whole history."""
        t0 = time.time()
        try:
            return self._confirm_on_fresh(session, results, i)
        finally:
            self.stats.confirm_s += time.time() - t0

    def _confirm_on_fresh(self, session: list[Case], results: list[Result], i: int) -> tuple[Case, Result] | None:
        """The case alone, here; then the warm engine's history: here too with inline shrinking, else handed to the
        background shrinker unconfirmed (``defer_history``), so that this worker goes on generating."""
        confirmed = self.fresh(session[i], results[i].verdict)
        if confirmed is not None:
            return confirmed
        history = history_case(session, [r.trace for r in results], i)
        if self.background is not None:
            self.defer_history(history, results[i], i)
            return None
        confirmed = self.fresh(history, results[i].verdict)
        if confirmed is None:
            self.stats.warm_only += 1
        return confirmed

    def fresh(self, candidate: Case, warm) -> tuple[Case, Result] | None:
        """The candidate on one fresh engine: (it, its result) when it diverges with a signature not yet known."""
        alone = decided_alone(warm.signature, warm.summary)  # no reference engine where it cannot change the verdict
        again = replay(candidate, self.host, self.cfg.timeout_s, alone=alone, startup_retry=False)
        count_case(self.stats, candidate, again)
        return (candidate, again) if again.verdict.status == "divergence" and again.verdict.signature not in self.known else None

    def defer_history(self, history: Case, warm: Result, i: int) -> None:
        """A warm divergence whose case alone did not reproduce it: its history (an engine start and up to a whole
        session of cases) is replayed by the background shrinker, which shrinks it only if it reproduces there and
        otherwise keeps it as flaky. On the H200 of 2026-12-02 confirming took 12 % of the workers' time
        (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/), time in which their engines generated nothing."""
        if self.background.found(history, warm, confirm=True,
                                 why=f"the history of a warm engine ({i + 1} cases), not yet confirmed on a fresh engine: the case "
                                     "alone did not reproduce it (the background shrinker replays it first)"):
            self.stats.histories_deferred += 1
