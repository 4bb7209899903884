"""Synthetic fuzz and campaign directories written through the real writers (CaseEvent,
RunSummary, FindingStore, stats.aggregate), for the report tests and screenshots."""
from __future__ import annotations

import dataclasses
import json
import os
import random

from hybridfuzz.campaign.records import CaseEvent, FindingState, FoundRecord, RunSummary
from hybridfuzz.case import Case, EngineConfig, Generate, Observation, OracleSpec, ResetPrefixCache, Sleep, WakeUp, dump_case
from hybridfuzz.model import FULL, LINEAR, ModelSpec

BUGS = {  # (dtype, prefix caching) -> signature, how likely a case there hits it
    ("fp8", True): ("reference:beyond-noise:3f9a1c02", 0.25),
    ("auto", True): ("self_consistency:repeat-differs:8b21d7e4", 0.08),
    ("fp8_e5m2", None): ("health:nonfinite:c0ffee11", 0.12),
}
STEPS = [[Generate([[5]]), Generate([[5]])], [Generate([[5]]), ResetPrefixCache(), Generate([[5]])],
         [Generate([[5]]), Sleep(), WakeUp(), Generate([[5]])], [Generate([[5]])] * 3, [Generate([[5]])]]
T0 = 1_790_000_000.0


def _events(rng: random.Random, n: int, t: float = 0.0) -> tuple[list[CaseEvent], float]:
    events = []
    for i in range(n):
        dt = rng.uniform(3, 11)
        t += dt
        dtype = rng.choice(["auto", "auto", "fp8", "fp8_e4m3", "fp8_e5m2"])
        pc = rng.choice([True, False, None])
        layers = "".join(rng.choice("LF") for _ in range(rng.randint(2, 4)))
        layers = "L" + layers[1:] if "L" not in layers else layers
        case = Case(model=ModelSpec(layers=tuple(LINEAR if x == "L" else FULL for x in layers)),
                    engine=EngineConfig(kv_cache_dtype=dtype, enable_prefix_caching=pc), steps=list(rng.choice(STEPS)))
        status, sig = "pass", ""
        bug = BUGS.get((dtype, pc))
        if bug and rng.random() < bug[1] * (1 + i / n):
            status, sig = "divergence", bug[0]
        elif rng.random() < 0.05:
            status = "unsupported"
        events.append(dataclasses.replace(CaseEvent.of(case, status, sig, t, dt * 0.9, "generate"), wall=T0 + t))
        if status == "divergence":
            for _ in range(rng.randint(2, 5)):  # shrinking
                t += rng.uniform(2, 6)
                e = CaseEvent.of(case, rng.choice(["divergence", "pass"]), sig if rng.random() < .6 else "", t, 3.0, "shrink")
                events.append(dataclasses.replace(e, wall=T0 + t))
    return events, t


def _finding(sig: str) -> Case:
    dtype = next(k[0] for k, v in BUGS.items() if v[0] == sig)
    oracle, symptom = sig.split(":")[:2]
    return Case(model=ModelSpec(layers=(LINEAR, FULL)), engine=EngineConfig(kv_cache_dtype=dtype, enable_prefix_caching=True),
                steps=[Generate(prompts=[[5, 6, 7, 8]]), ResetPrefixCache(), Generate(prompts=[[5, 6, 7, 8]])],
                oracle=OracleSpec(checks=["health", "self_consistency", "reference"]),
                observed=[Observation(vllm="0.32.0", verdict="divergence", oracle=oracle, summary=f"synthetic {symptom} finding at token 1",
                                      signature=sig, evidence=["synthetic"])])


def _write_events(path: str, events: list[CaseEvent]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(e.to_json() + "\n" for e in events)


def write_demo_fuzz(path: str, seed: int = 0, n: int = 240, budget_s: float = 1800.0) -> str:
    """A plausible `hybridfuzz fuzz --out DIR` directory."""
    rng = random.Random(seed)
    events, t = _events(rng, n)
    _write_events(os.path.join(path, "events.jsonl"), events)
    found = sorted({e.signature for e in events if e.status == "divergence" and e.signature})
    os.makedirs(os.path.join(path, "findings"), exist_ok=True)
    records = []
    for sig in found:
        fp = os.path.join(path, "findings", sig.replace(":", "_") + ".yaml")
        with open(fp, "w", encoding="utf-8") as f:
            f.write(dump_case(_finding(sig)))
        first = next(e.t for e in events if e.signature == sig)
        records.append(FoundRecord(sig, fp, f"synthetic {sig}", first, [2, 3, 8, 0], 30.0))
    firsts = [e.t for e in events if e.status == "divergence" and e.signature]
    summary = RunSummary(started="2026-11-29T10:00:00", budget_s=budget_s, elapsed_s=round(t, 2), cases=len(events), findings=len(found),
                         time_to_first_finding_s=round(min(firsts), 2) if firsts else None,
                         shrink_s=round(sum(e.seconds for e in events if e.phase == "shrink"), 2), engine="cpu", vllm="0.32.0",
                         seed=seed, finding_list=records)
    with open(os.path.join(path, "summary.json"), "w", encoding="utf-8") as f:
        f.write(summary.to_json())
    return path


def write_demo_campaign(path: str, seed: int = 0, n: int = 240, workers: int = 2) -> str:
    """A plausible `hybridfuzz campaign --dir DIR` directory: workers/<i>/events.jsonl (worker 0 restarted
    once), finding states (one left open), campaign.json and the aggregate summary.json."""
    from hybridfuzz.campaign.state import FindingStore
    from hybridfuzz.campaign.stats import aggregate

    rng = random.Random(seed)
    all_events = []
    for i in range(workers):
        events, t = _events(rng, n // workers)
        if i == 0:  # a restart: the loop's t starts again at 0, wall goes on
            more, _ = _events(rng, n // (2 * workers))
            events += [dataclasses.replace(e, wall=T0 + t + 20 + e.t) for e in more]
        _write_events(os.path.join(path, "workers", str(i), "events.jsonl"), events)
        with open(os.path.join(path, "workers", str(i), "sessions.jsonl"), "w") as f:
            f.write('{"start": 0}\n' * (2 if i == 0 else 1))
        all_events += events
    store = FindingStore(path)
    found = sorted({e.signature for e in all_events if e.status == "divergence" and e.signature})
    os.makedirs(os.path.join(path, "findings"), exist_ok=True)
    for k, sig in enumerate(found):
        fp = os.path.join(path, "findings", sig.replace(":", "_") + ".yaml")
        case = _finding(sig)
        with open(fp, "w", encoding="utf-8") as f:
            f.write(dump_case(case))
        store.set(sig, FindingState.OPEN if k == len(found) - 1 else FindingState.REPLAYED, fp, case)
    spent = max(e.wall for e in all_events) - T0
    meta = {"budget_s": 3600.0, "spent_s": spent, "runs": 1, "engine": "cpu", "seed": seed, "workers": workers, "database": "dir"}
    with open(os.path.join(path, "campaign.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)
    with open(os.path.join(path, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(aggregate(path, meta), f)
    return path
