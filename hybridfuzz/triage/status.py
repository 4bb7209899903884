"""Triage: findings grouped by signature, with their status per vLLM version.

A finding is a case file whose ``observed`` list holds a divergence. Its
signature (``oracle:symptom:hash`` from ``Verdict.signature``; the hash covers
the oracle, the symptom and where it failed) groups the same bug found again or
shrunk differently. Per vLLM version the status comes from the case's
``expect`` (what it should do) and ``observed`` (what it did), latest wins.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from hybridfuzz.case import Case, CaseError, load_case_file
from hybridfuzz.triage.bisection import matrix_text, outcomes
from hybridfuzz.triage.findings import split_signature


@dataclass
class Entry:
    path: str
    case: Case | None
    error: str = ""

    @property
    def signature(self) -> str:
        if self.case is None:
            return ""
        bad = [o for o in self.case.observed if o.verdict == "divergence"]
        return (bad[-1].signature or f"{bad[-1].oracle}:unknown:-") if bad else ""

    @property
    def signatures(self) -> set[str]:
        """Every symptom this case was seen with (each observation's signature and its other symptoms): one finding."""
        if self.case is None:
            return set()
        return {s for o in self.case.observed if o.verdict == "divergence" for s in (o.signature, *o.symptoms) if s}


@dataclass
class Group:
    signature: str
    oracle: str
    symptom: str
    where: str
    entries: list[Entry] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # vllm version -> status text

    @property
    def summary(self) -> str:
        for e in self.entries:
            for o in reversed(e.case.observed if e.case else []):
                if o.verdict == "divergence":
                    return o.summary
        return ""


def where_of(summary: str) -> str:
    """Where it failed, read from the verdict summary: "step 2 (generate)", "start-up", "token0"..."""
    import re

    m = re.search(r"at (step \d+ \(\w+\)|start-up)", summary)
    if m:
        return m.group(1)
    m = re.search(r"(?:from|at) token (\d+)", summary)
    if m:
        return "token0" if m.group(1) == "0" else "token1+"
    m = re.search(r"step (\d+)", summary)
    return f"step {m.group(1)}" if m else ""


def find_cases(dirs: list[str]) -> list[str]:
    out = []
    for d in dirs:
        if os.path.isfile(d):
            out.append(d)
            continue
        for root, subdirs, files in os.walk(d):
            subdirs.sort()
            out += [os.path.join(root, f) for f in sorted(files) if f.endswith((".yaml", ".yml"))]
    return out


def load_entries(dirs: list[str]) -> list[Entry]:
    entries = []
    for path in find_cases(dirs):
        try:
            entries.append(Entry(path, load_case_file(path)))
        except CaseError as e:
            entries.append(Entry(path, None, str(e)))
    return entries


def version_status(case: Case) -> dict[str, str]:
    """vLLM version -> "expected pass, observed divergence" style status, newest observation per version."""
    seen: dict[str, str] = {}
    for o in case.observed:
        seen[o.vllm] = o.verdict
    out = {}
    for v in sorted(set(case.expect) | set(seen), key=_version_key):
        exp, obs = case.expect.get(v), seen.get(v)
        if obs is None:
            out[v] = f"expect {exp} (not run)"
        elif exp is None:
            out[v] = obs
        elif exp == obs:
            out[v] = f"{obs} (as expected)"
        else:
            out[v] = f"{obs} (expected {exp})"
    return out


def _version_key(v: str):
    parts = []
    for p in v.replace("+", ".").split("."):
        parts.append((0, int(p), "") if p.isdigit() else (1, 0, p))
    return parts


def group(entries: list[Entry]) -> tuple[list[Group], list[Entry]]:
    """(finding groups sorted by size, cases without a finding)."""
    groups: dict[str, Group] = {}
    clean = []
    for e in entries:
        sig = e.signature
        if not sig:
            clean.append(e)
            continue
        g = next((groups[x] for x in sorted(e.signatures | {sig}) if x in groups), None)  # a symptom already seen: same finding
        if g is None:
            oracle, symptom = split_signature(sig)
            g = groups[sig] = Group(sig, oracle, symptom, "")
        for x in e.signatures:
            groups.setdefault(x, g)
        g.entries.append(e)
        for v, s in version_status(e.case).items():  # type: ignore[arg-type]
            g.versions.setdefault(v, s)
            if "divergence" in s:
                g.versions[v] = s
    unique = list({id(g): g for g in groups.values()}.values())
    for g in unique:
        g.where = where_of(g.summary)
    return sorted(unique, key=lambda g: (-len(g.entries), g.signature)), clean


def render_text(groups: list[Group], clean: list[Entry]) -> str:
    lines = []
    if not groups:
        lines.append("no findings")
    for g in groups:
        lines.append(f"{g.signature}  [{g.oracle}] {g.symptom}" + (f" @ {g.where}" if g.where else "") + f"  ({len(g.entries)} case{'s' if len(g.entries) != 1 else ''})")
        if g.summary:
            lines.append(f"  {g.summary[:160]}")
        for v, s in g.versions.items():
            lines.append(f"  vLLM {v}: {s}")
        for e in g.entries:
            lines.append(f"  - {e.path}")
    ok = [e for e in clean if e.case is not None]
    bad = [e for e in clean if e.case is None]
    if ok:
        lines.append(f"cases without a finding: {len(ok)}")
        for e in ok:
            st = "; ".join(f"{v}: {s}" for v, s in version_status(e.case).items()) or "no expectation"  # type: ignore[arg-type]
            lines.append(f"  - {e.path}  {st}")
    if bad:
        lines.append(f"unreadable cases: {len(bad)}")
        lines += [f"  - {e.path}: {e.error}" for e in bad]
    # case x version, from observed/expect (hybridfuzz bisect writes them)
    cases = {e.path: e.case for g in groups for e in g.entries if e.case is not None} | {e.path: e.case for e in ok}
    if cases:
        lines += ["", matrix_text(cases)]
    return "\n".join(lines)


def render_json(groups: list[Group], clean: list[Entry]) -> str:
    return json.dumps({
        "findings": [{"signature": g.signature, "oracle": g.oracle, "symptom": g.symptom, "where": g.where, "summary": g.summary,
                      "versions": g.versions, "cases": [e.path for e in g.entries]} for g in groups],
        "clean": [{"case": e.path, "versions": version_status(e.case)} for e in clean if e.case is not None],
        "invalid": [{"case": e.path, "error": e.error} for e in clean if e.case is None],
        "matrix": {e.path: {"cpu": outcomes(e.case, "cpu"), "gpu": outcomes(e.case, "gpu")} for e in [*(x for g in groups for x in g.entries), *clean] if e.case is not None},
    }, indent=2)
