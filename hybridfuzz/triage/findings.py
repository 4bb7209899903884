"""Findings on disk: one YAML case per signature, written atomically when found and
whenever shrinking makes it smaller, so a killed run never loses what it found."""
from __future__ import annotations

import dataclasses
import datetime
import glob
import os
import re
from dataclasses import dataclass
from typing import Callable

from hybridfuzz.case import Case, CaseError, DeviceKind, Generate, Observation, device_kind, dump_case, load_case_file
from hybridfuzz.store import write_atomic


def case_size(case: Case) -> tuple:
    """Smaller is simpler: fewer layers, fewer steps, fewer prompt tokens, fewer non-default knobs."""
    tokens = sum(len(p) + s.max_tokens for s in case.steps if isinstance(s, Generate) for p in s.prompts)
    from hybridfuzz.case import EngineConfig

    knobs = sum(1 for f in EngineConfig.__dataclass_fields__ if getattr(case.engine, f) != getattr(EngineConfig(), f))
    return (len(case.model.layers), len(case.steps), tokens, knobs)


def filename(signature: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", signature) + ".yaml"


def split_signature(sig: str) -> tuple[str, str]:
    """(oracle, symptom) of ``oracle:symptom:hash``; the symptom may itself hold colons."""
    parts = sig.split(":")
    if len(parts) >= 3:
        return parts[0], ":".join(parts[1:-1])
    return (parts[0], "") if parts else ("", "")


# Appended to a finding's note once its minimal case replayed on a fresh engine: from then on it is final.
REPLAYED_NOTE = "; replayed on a fresh engine: same signature"


def replay_note(replays: bool) -> str:
    """What a finding's note gains from its replay on a fresh engine."""
    return REPLAYED_NOTE if replays else "; did NOT replay on a fresh engine (flaky)"


def replayed(case: Case, again, signature: str) -> tuple[Case, bool]:
    """A (shrunk) finding after its replay on a fresh engine, and whether it replayed. When it did, the replay's
    observation replaces the one recorded before shrinking, whose summary named a step the minimal case may no
    longer have (an exported report of a 3-step case said "step 5", 2026-12-01)."""
    replays = again.verdict.signature == signature
    # Replayed: the replay's observation replaces the old one. Not: it is kept beside it, so the flaky file says
    # what the fresh engine did instead.
    case = case.replace(observed=[observation(again)] if replays else [*case.observed, observation(again)])
    return case.replace(note=case.note + replay_note(replays)), replays


def _observed_signatures(*dirs: str):
    """(path, case, observation, signature) for every signature observed in a case file under dirs: each
    observation's own and its other symptoms (the same case's other symptoms: one finding). Files that do not load
    are passed over."""
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "*.yaml"), recursive=True)):
            try:
                case = load_case_file(path)
            except CaseError:
                continue
            for o in case.observed:
                for sig in (o.signature, *o.symptoms):
                    if sig:
                        yield path, case, o, sig


def in_checkout() -> bool:
    """Run from a hybridfuzz checkout (./corpus exists): findings go to corpus/found and the corpus is known."""
    return os.path.isdir("corpus")


def corpus_dirs() -> tuple[str, ...]:
    """The known findings when none are named: the whole corpus in a checkout, else none."""
    return ("corpus",) if in_checkout() else ()


def known_signatures(*dirs: str, on: DeviceKind | None = None, release: str | None = None) -> set[str]:
    """Signatures recorded in the observed entries of every case under dirs; with ``on``, only those seen on that
    kind of device. A signature names the oracle, the symptom and where it failed, not the bug: a CPU finding's
    can equal a GPU one's (Zamba2's fp8 reference flip on AVX-512, 9c47a48c, hid 37 GPU divergences of another
    kind in the 0.33.0 campaign of 2026-12-04), so a campaign knows only what was filed for its own kind. With
    ``release``, only what was seen on that vLLM release."""
    return {sig for _, _, o, sig in _observed_signatures(*dirs)
            if (on is None or device_kind(o.device) == on) and (release is None or o.vllm == release)}


def ledger_bound_signatures(ledger, *dirs: str, on: DeviceKind | None = None) -> set[str]:
    """Signatures that the cases under ``dirs`` show only as members of real ledger bugs (a ``bug:`` naming a bug, not
    noise or a refusal). A signature names oracle, symptom and family, not the cause: on a Qwen3-Next model every
    seeded request that samples other tokens at token 0 is one signature, so the reload_weights bug's member hid the
    abort-dirty-slot fault in 7 of the 12 abort cases of a fault bench (2026-12-07), none with a reload step. A finding with such a signature is
    known only where the ledger's ``match`` puts it in a bug (its cause set holds)."""
    bound: set[str] = set()
    free: set[str] = set()
    for _, case, o, sig in _observed_signatures(*dirs):
        if on is not None and device_kind(o.device) != on:
            continue
        bug = ledger.bugs.get(case.bug) if ledger is not None and case.bug else None
        (bound if bug is not None and bug.is_bug else free).add(sig)
    return bound - free


@dataclass(frozen=True)
class KvClass:
    """A bug class that a quantised KV cache dtype causes: its symptom, on one vLLM release and one kind of device.

    A signature names the family (oracles/verdict.py ``output_where``), so one KV-dtype bug seen on five families is
    five signatures: README command (a) on an AMX CPU (2026-12-04) wrote 27 findings, 23 of them quantised-KV bugs of
    kinds the corpus already filed on another family, each shrunk or left to shrink (results/2026-12-04-cpu-vllm0.32.0-amx-readme-fuzz/);
    with classes the same command left 9 to shrink and filed 13 as known (results/2026-12-05-cpu-vllm0.32.0-kv-dtype-classes/). A finding belongs
    to a known class only when its case passes with the KV dtype set back to auto (the loop's control run,
    campaign/filing.py ``KnownFiling.of_known_class``), so the KV path shared by every family is the cause. The release
    is part of the class: a class filed on 0.33.0 says nothing of 0.26.0."""

    kv_cache_dtype: str
    oracle: str
    symptom: str
    vllm: str
    device: DeviceKind

    def __str__(self) -> str:
        return f"kv_cache_dtype {self.kv_cache_dtype}, {self.oracle}:{self.symptom}, vLLM {self.vllm} on {self.device}"


def kv_class(case: Case, signature: str, vllm: str, device: str) -> KvClass | None:
    """The KV-dtype class a divergence of this case would belong to; None with the auto KV cache."""
    if case.engine.kv_cache_dtype == "auto" or not signature:
        return None
    oracle, symptom = split_signature(signature)
    return KvClass(case.engine.kv_cache_dtype, oracle, symptom, vllm, device_kind(device))


def known_kv_classes(*dirs: str) -> dict[KvClass, str]:
    """The KV-dtype classes filed under dirs, each with the path of one case file that shows it: every divergence
    observed (its signature and its other symptoms) of a case with a quantised KV cache."""
    classes: dict[KvClass, str] = {}
    for path, case, o, sig in _observed_signatures(*dirs):
        if o.verdict == "divergence" and (cls := kv_class(case, sig, o.vllm, o.device)) is not None:
            classes.setdefault(cls, path)
    return classes


def filed_class(case: Case, verdict, vllm: str, device: str, classes: dict[KvClass, str]) -> str | None:
    """The case file of the KV-dtype class filed in ``classes`` that this divergence would belong to, before its
    control runs (``auto_kv_control``); None if none. Only a wrong output, whose signature names the family
    (oracles/verdict.py ``names_family``), and never the class's own file: the class was learnt from this signature."""
    from hybridfuzz.oracles.verdict import names_family

    cls = kv_class(case, verdict.signature, vllm, device)
    like = classes.get(cls) if cls is not None else None
    if like is None or not names_family(verdict.where) or os.path.basename(like) == filename(verdict.signature):
        return None
    return like


def auto_kv_control(case: Case, verdict) -> Case | None:
    """The control that puts a divergence in its KV-dtype class: the case with the auto KV cache, which must pass on a
    fresh engine. None where no control is needed: a reference finding whose reference differs from the case in its
    KV dtype alone has the KV dtype as its cause by construction, and the control would compare two runs of one
    configuration."""
    auto = case.replace(engine=dataclasses.replace(case.engine, kv_cache_dtype="auto"))
    if verdict.oracle == "reference" and auto.reference_case().engine == auto.engine:
        return None
    return auto


def of_filed_class(case: Case, verdict, vllm: str, device: str, classes: dict[KvClass, str],
                   passes: Callable[[Case], bool]) -> str | None:
    """The case file of the filed KV-dtype class this divergence belongs to, with its control (``auto_kv_control``),
    where one is needed, passing by ``passes`` (a run on a fresh engine); None otherwise. The one rule of both
    ``hybridfuzz fuzz`` (campaign/filing.py ``KnownFiling.of_known_class``) and ``pytest fuzz/``."""
    like = filed_class(case, verdict, vllm, device, classes)
    if like is None:
        return None
    control = auto_kv_control(case, verdict)
    return like if control is None or passes(control) else None


def with_observation(case: Case, obs: Observation) -> Case:
    """The case with this observation replacing any earlier one of the same vLLM, device, CPU ISA class, verdict and
    signature. One of another verdict stays beside it: machines of one class can disagree (LFM2's batch-drift cases
    passed on one AVX2 box and diverged on another), and ``reproduce.expectation`` then asserts nothing on that class.
    One of another signature stays too: a shrink's device fault, seen once, was replaced by `replay --record`'s three
    runs that showed only the int4 reference distance (H100, 2026-12-05), and the file no longer said it had faulted."""
    kept = [o for o in case.observed
            if not (o.vllm == obs.vllm and o.device == obs.device and o.isa == obs.isa and o.verdict == obs.verdict
                    and o.signature == obs.signature)]
    return case.replace(observed=[*kept, obs])


def recorded_signatures(case: Case) -> list[str]:
    """The signatures a case file records for its finding, newest first: each divergence observation's own (the most
    frequent symptom of its runs; a symptom seen beside it is left out). What ``hybridfuzz shrink`` keeps to: on the
    H100 of 2026-12-05 two shrinks took the symptom their first run happened to show, the int4 KV's distance from the
    auto reference, and walked it to the tolerance's edge instead of the crash and the same-batch difference their
    files recorded (results/2026-12-05-h100-vllm0.33.0-shrinks-gpu-fault/)."""
    out: list[str] = []
    for o in reversed(case.observed):
        if o.verdict == "divergence" and o.signature and o.signature not in out:
            out.append(o.signature)
    return out


def free_path(directory: str, signature: str) -> str:
    """Where a new finding of this signature goes: ``<sig>.yaml``, or ``<sig>-2.yaml``, ... when another finding holds
    that name. A signature names a symptom and a place, not a case: two open findings can share one (a 20-minute CPU
    run overwrote two open findings with re-finds of a known class and kept 30 files of 32)."""
    stem = filename(signature)[: -len(".yaml")]
    path, n = os.path.join(directory, f"{stem}.yaml"), 1
    while os.path.exists(path) or os.path.exists(path + ".flaky"):
        n += 1
        path = os.path.join(directory, f"{stem}-{n}.yaml")
    return path


def write_finding(directory: str, case: Case, path: str | None = None) -> str:
    """Write a finding: a new one to a free name (``free_path``), never over another; an update (a smaller case of the
    same finding, its replay) to its own ``path``."""
    path = path or free_path(directory, case.observed[-1].signature)
    write_atomic(path, dump_case(case))
    return path


def observation(result) -> Observation:
    """What one evaluated run saw, in the form a case file records."""
    return observation_of(result.verdict, result.trace.env)


# Evidence lines a case file keeps per observation: a comparison's four (earlier, later, why, cached tokens) and the
# controls' verdicts after them (oracles/consistency.py), which say why a schedule-only divergence stood.
OBSERVED_EVIDENCE = 6


def observation_of(v, env: dict) -> Observation:
    from hybridfuzz.machine import cpu_isa

    device = env.get("device", "cpu")
    return Observation(vllm=env.get("vllm", "unknown"), verdict=v.status, device=device, torch=env.get("torch", ""),
                       date=datetime.date.today().isoformat(), oracle=v.oracle, summary=v.summary, signature=v.signature,
                       evidence=v.evidence[:OBSERVED_EVIDENCE], isa=cpu_isa() if device == "cpu" else "")
