"""Filing findings: writing a finding's case (``FindingWriter``), and filing a new signature of a bug already known,
of the bug ledger or of a KV-dtype class filed before, as found, without shrinking it (``KnownFiling``)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from hybridfuzz.campaign.config import FuzzConfig
from hybridfuzz.campaign.counting import Stats, count_case
from hybridfuzz.campaign.records import FindingState, FoundRecord
from hybridfuzz.case import Case
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import Result, replay
from hybridfuzz.oracles.health import decided_alone
from hybridfuzz.triage.findings import KvClass, case_size, filename, kv_class, observation, of_filed_class, write_finding


@dataclass(eq=False)
class FindingWriter:
    """Writes findings under the config's findings directory, tells ``on_state``, and learns the KV-dtype class of
    each new one (``kv_classes``: class -> a file showing it)."""

    cfg: FuzzConfig
    kv_classes: dict[KvClass, str]

    def write(self, case: Case, result: Result, why: str = "", state: FindingState = FindingState.OPEN, path: str | None = None) -> str:
        """Write a new finding of this result's signature to a free name, or, with ``path``, a smaller case of the
        finding there; it is open until replayed. ``why``: a note. Returns its path."""
        recorded = self.record(case, result, why)
        if path is None and self.cfg.claim is not None:
            # A campaign's claims give each signature to one worker at a time: its file is that claim's, and a worker
            # restarted after a kill -9 resumes it there instead of starting a second file.
            path = os.path.join(self.cfg.findings_dir, filename(result.verdict.signature))
        path = write_finding(self.cfg.findings_dir, recorded, path)
        obs = recorded.observed[-1]
        if state is FindingState.OPEN and (cls := kv_class(case, obs.signature, obs.vllm, obs.device)) is not None:
            self.kv_classes.setdefault(cls, path)  # the first of its class in this run: later ones are of a known class
        if self.cfg.on_state:
            self.cfg.on_state(result.verdict.signature, state, path, recorded)
        return path

    def record(self, case: Case, result: Result, why: str = "") -> Case:
        obs = observation(result)
        return case.replace(observed=[obs], note=f"found by hybridfuzz fuzz (seed {self.cfg.seed}) on {obs.date}" + (f"; {why}" if why else ""))


@dataclass(eq=False)
class KnownFiling:
    """A new signature of a bug known already, written as found and named in the summary, not shrunk. Neither ever
    takes the inline shrink target (``target``)."""

    cfg: FuzzConfig
    host: Host  # runs the controls of ``of_known_class``
    stats: Stats
    known: set[str]
    writer: FindingWriter
    outside_classes: set[str] = field(default_factory=set, init=False)  # new signatures whose control with the auto KV cache diverged too

    def of_ledger_bug(self, case: Case, result: Result, target: str | None) -> bool:
        """A new signature of a bug already in the ledger (the same kind of device, the bug's cause set, a symptom its
        cases showed): the result is a run on a fresh engine, so it is confirmed; written as a member of the bug, with
        its ``bug:`` set, and not shrunk. Re-finds of known bugs took 66 % of a 20-minute CPU run's budget shrinking."""
        v = result.verdict
        if self.cfg.ledger is None or v.signature == target:
            return False
        bug = self.cfg.ledger.match(case, v.signature, result.trace.env.get("vllm", ""), v.summary)
        if bug is None:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return True  # another worker has it
        self.known.add(v.signature)
        path = self.writer.write(case.replace(bug=bug.id), result, state=FindingState.KNOWN_CLASS,
                                 why=f"a member of ledger bug {bug.id} ({bug.status}): not shrunk")
        self.stats.known_bug.append(FoundRecord(v.signature, path, v.summary, round(time.time() - self.stats.started, 1),
                                                list(case_size(case)), 0.0, like=bug.id))
        return True

    def of_known_class(self, case: Case, result: Result, target: str | None) -> bool:
        """A new signature of a KV-dtype class filed before (findings.KvClass): written as found and named in the
        summary, not shrunk. Only a wrong output, whose signature names the family, and only when a control, the
        case with the auto KV cache on a fresh engine, passes: otherwise more than the KV dtype is at work, and it
        is a finding like any other."""
        v, obs = result.verdict, observation(result)
        if v.signature == target or v.signature in self.outside_classes:
            return False

        def passes(control: Case) -> bool:
            checked = replay(control, self.host, self.cfg.timeout_s, alone=decided_alone(v.signature, v.summary), startup_retry=False)
            count_case(self.stats, control, checked)
            if checked.verdict.status != "pass":
                self.outside_classes.add(v.signature)
            return checked.verdict.status == "pass"

        like = of_filed_class(case, v, obs.vllm, obs.device, self.writer.kv_classes, passes)
        if like is None:
            return False
        if self.cfg.claim is not None and not self.cfg.claim(v.signature):
            return True  # another worker has it
        self.known.add(v.signature)
        path = self.writer.write(case, result, state=FindingState.KNOWN_CLASS,
                                 why=f"of a known class ({kv_class(case, v.signature, obs.vllm, obs.device)}), as {os.path.basename(like)}: passes with kv_cache_dtype auto; not shrunk")
        self.stats.known_class.append(FoundRecord(v.signature, path, v.summary, round(time.time() - self.stats.started, 1),
                                                  list(case_size(case)), 0.0, like=like))
        return True
