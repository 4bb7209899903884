"""What one issue reports: a ledger bug (one issue per root cause, not one per case) or a single case.

A bug of the ledger (corpus/bugs.yaml) has many member cases; the issue shows one, the
representative: the smallest (fewest steps, layers, prompt tokens), preferring one whose
latest divergence was seen on the bug's kind of device. Its script checks the signature of
that case's observation that shows the bug's own symptom (a NaN bug whose case also once
died by SIGILL on another CPU checks the NaN).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from hybridfuzz.case import Case, Generate, Observation, Submit, device_kind
from hybridfuzz.export.script import latest_divergence
from hybridfuzz.triage.ledger import Bug, Ledger, Member, ReproducerRun, device_kind_of, symptom_class


class NothingToReport(ValueError):
    """A bug that gets no issue (triaged "not a bug", or no case shows it); str() is one line."""


@dataclass(frozen=True)
class Report:
    """What one issue says, whichever way it was asked for."""

    title: str  # without "[Bug]: "
    case: Case  # the case whose script and snippet the issue shows
    case_name: str
    observation: Observation | None  # the divergence whose signature the script checks
    seen: list[Observation]  # where it was seen: the divergent observations of every member, oldest first
    device: Literal["cpu", "gpu", "any"]  # the bug's (the ledger's device): where its runs and observations count
    runs: list[ReproducerRun] = field(default_factory=list)  # standalone runs of the reproducer (the ledger's)
    bug: Bug | None = None
    members: int = 1

    @property
    def name(self) -> str:
        """The stem of the files written: the bug id, or the case file's name."""
        return self.bug.id if self.bug else os.path.splitext(os.path.basename(self.case_name))[0]


def on(kind: str, device: str) -> bool:
    """Whether a run or observation of this kind of device counts for a bug of ``device`` ("any": both kinds)."""
    return device == "any" or kind == device


def prompt_tokens(case: Case) -> int:
    return sum(len(p) for s in case.steps if isinstance(s, (Generate, Submit)) for p in s.prompts)


def needs_draft_model(case: Case) -> bool:
    """Speculative decoding with a draft model: the standalone reproducer builds that tiny model too (DRAFT_MODEL, as
    engines/speculative.py does), a second model to write and load, so a member without one is exported first."""
    spec = case.engine.speculative_config
    return spec is not None and spec.method == "draft_model"


def representative(members: list[Member], device: str, here: str | None = None) -> Member:
    """The member a maintainer reads first: the smallest, seen last on the bug's kind of device if any was; for a bug
    of any device, one seen on ``here`` (the kind of machine the export runs on) if any was: a GPU export of
    hybrid-no-mamba-layers-assertion first picked its CPU member, which passed on the H100 (2026-12-06)."""
    def key(m: Member):
        kind = device_kind_of(m.case)
        return (not on(kind, device), here is not None and kind != here, needs_draft_model(m.case), len(m.case.steps),
                len(m.case.model.layers), prompt_tokens(m.case), m.path)
    return min(members, key=key)


def bug_observation(case: Case, bug: Bug) -> Observation | None:
    """The case's latest divergence on the bug's kind of device that shows the bug's symptom; failing that, its latest
    on that kind of device; failing that, its latest."""
    bad = [o for o in case.observed if o.verdict == "divergence" and o.signature]
    here = [o for o in bad if on(device_kind(o.device), bug.device)]
    own = [o for o in here if symptom_class(o.signature, o.summary) == bug.symptom]
    for group in (own, here, bad):
        if group:
            return group[-1]
    return None


def bug_report(ledger: Ledger, bug_id: str, here: str | None = None) -> Report:
    """The bug's report, on its representative member (``here``: this machine's kind of device, "cpu" or "gpu")."""
    if bug_id not in ledger.bugs:
        known = ", ".join(sorted(ledger.bugs)) or "none"
        raise NothingToReport(f"{bug_id!r} is not in {ledger.path} (bugs there: {known})")
    bug = ledger.bugs[bug_id]
    if not bug.is_bug:
        raise NothingToReport(f"{bug_id} is triaged '{bug.status}'" + (f" ({bug.reason})" if bug.reason else "") + "; no issue to export")
    members = ledger.members.get(bug_id, [])
    if not members:
        raise NothingToReport(f"{bug_id}: no corpus case names it (bug: {bug_id})")
    rep = representative(members, bug.device, here)
    return Report(title=bug.title, case=rep.case, case_name=rep.path, observation=bug_observation(rep.case, bug),
                  seen=ledger.seen(bug_id), device=bug.device, runs=list(bug.runs), bug=bug, members=len(members))


def case_report(case: Case, case_name: str, title: str) -> Report:
    """A single case, outside the ledger: its own observations, no standalone runs recorded."""
    seen = sorted((o for o in case.observed if o.verdict == "divergence"), key=lambda o: o.date)
    return Report(title=title, case=case, case_name=case_name, observation=latest_divergence(case), seen=seen,
                  device=device_kind_of(case))


def run_kind(run: ReproducerRun) -> Literal["cpu", "gpu"]:
    """A run's device as a kind: "CPU x86_64/avx2" (how runs name a CPU) or "cpu" is a CPU, a GPU's name a GPU."""
    return "cpu" if run.device in ("", "cpu") or run.device.startswith("CPU") else "gpu"


def latest_run(report: Report) -> ReproducerRun | None:
    """The newest standalone run on the report's kind of device: the machine whose environment the issue shows."""
    runs = [r for r in report.runs if on(run_kind(r), report.device)]
    return max(reversed(runs), key=lambda r: r.date) if runs else None
