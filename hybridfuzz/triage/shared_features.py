"""What a run's findings share beyond chance: case features over-represented in one class of findings.

Signatures split one bug into many (another symptom, step or family is another signature), so a person
triaging the 39 findings of a 10-minute H200 campaign looks for what they have in common. On 2026-12-03
(results/2026-12-03-h200-vllm0.32.0-default-campaign/) that was done by hand: every self-consistency finding whose later run
replaced the distribution had a per-token-head KV dtype (7 of 7, where 42 % of all cases had one), and every
drift-only one had fp8 weights. Here the base rates come from the run's own case events (the cases drawn, not
the ones imagined), each finding's features from its case through the same ``CaseEvent.of`` (one rule for
both), and a binomial tail ranks them: the chance that at least k of n findings of a class have a feature
that a fraction p of all cases had. Many features are tested at once: about one in a hundred lines at
``P < 0.01`` is chance; the report says how many were tested.
"""
from __future__ import annotations

import dataclasses
import glob
import math
import os
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from hybridfuzz.campaign.records import CaseEvent, iter_events
from hybridfuzz.case import CaseError, load_case_file
from hybridfuzz.oracles.compare import mismatch_kind

REPORT_BELOW = 0.01  # tail probability under which a shared feature is reported
MIN_FINDINGS = 3  # fewer findings in a class say nothing
MIN_SHARED = 2  # one finding with a rare feature is not something findings share


def kv_scales(kv_cache_dtype: str) -> str:
    """How a KV dtype keeps its scales (dtypes of one kind share their kernels' scale handling)."""
    if kv_cache_dtype.endswith("_per_token_head"):
        return "per-token-head"
    if kv_cache_dtype.startswith("nvfp4"):
        return "block"
    if kv_cache_dtype.startswith("fp8"):
        return "per-tensor"
    return "none"


# A feature: its name and how to read it from a CaseEvent ("" = not recorded, as in files written before it was).
FEATURES: dict[str, Callable[[CaseEvent], str]] = {
    "kv_cache_dtype": lambda e: e.kv_cache_dtype,
    "kv_scales": lambda e: kv_scales(e.kv_cache_dtype) if e.kv_cache_dtype else "",
    "family": lambda e: e.family,
    "backend": lambda e: e.backend,
    "weights": lambda e: e.weights,
    "graphs": lambda e: e.graphs,
    "prefix_caching": lambda e: "" if e.prefix_caching is None else str(e.prefix_caching).lower(),
    "memory": lambda e: e.memory,
    "one_token_prompt": lambda e: e.one_token_prompt,
}


@dataclass(frozen=True)
class SharedFeature:
    finding_class: str  # "self_consistency:outside-top-k", "health:error", ...
    feature: str
    value: str
    findings_with: int
    findings: int
    case_fraction: float  # of all cases run
    p: float  # binomial tail: at least findings_with of findings by chance

    def line(self) -> str:
        return (f"{self.finding_class}: {self.feature}={self.value} in {self.findings_with} of {self.findings} "
                f"findings, {self.case_fraction:.0%} of cases (P={self.p:.2g})")


def finding_class(oracle: str, signature: str, evidence: list[str]) -> str:
    """oracle and kind: a health finding's symptom (crash, error, nonfinite, timeout); a wrong output's
    mismatch kind, read from its evidence's "why:" line (a replaced distribution is ``outside-top-k``)."""
    if oracle == "health" or signature.startswith("health:"):
        return "health:" + (signature.split(":")[1] if signature.count(":") >= 2 else "?")
    why = next((e[len("why: "):] for e in evidence if e.startswith("why: ")), "")
    return f"{oracle or signature.split(':')[0]}:{mismatch_kind(why) or '?'}"


def tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return min(1.0, sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def finding_events(run_dir: str) -> list[tuple[str, CaseEvent]]:
    """(class, the finding's case as an event) of each finding file of the run (flaky ones too: still findings)."""
    out = []
    for path in sorted(glob.glob(os.path.join(run_dir, "findings", "*.yaml*"))):
        try:
            case = load_case_file(path)
        except (CaseError, OSError):
            continue
        bad = [o for o in case.observed if o.verdict == "divergence"]
        if not bad:
            continue
        o = bad[0]  # what the campaign saw first: the symptom it was filed under
        out.append((finding_class(o.oracle, o.signature, o.evidence), CaseEvent.of(case, "divergence", o.signature, 0.0, 0.0, "generate")))
    return out


def shared_features(run_dir: str) -> tuple[list[SharedFeature], int]:
    """Features over-represented in a class of findings (most surprising first), and how many were tested."""
    events = [e for e in iter_events(run_dir) if e.phase == "generate"]
    found = finding_events(run_dir)
    classes: dict[str, list[CaseEvent]] = {}
    for cls, ev in found:
        classes.setdefault(cls, []).append(ev)
    out, tested = [], 0
    for name, read in FEATURES.items():
        base = Counter(read(e) for e in events)
        total = sum(n for v, n in base.items() if v)
        if not total:
            continue  # not recorded in this run's events
        for cls, evs in sorted(classes.items()):
            if len(evs) < MIN_FINDINGS:
                continue
            for value, k in Counter(read(e) for e in evs).items():
                p0 = base.get(value, 0) / total
                tested += 1
                if not value or k < MIN_SHARED or k / len(evs) <= p0:
                    continue
                p = tail(k, len(evs), p0)
                if p < REPORT_BELOW:
                    out.append(SharedFeature(cls, name, value, k, len(evs), round(p0, 4), p))
    return sorted(out, key=lambda s: s.p), tested


def summary(run_dir: str) -> dict:
    """``shared_features`` as summary.json holds it (a campaign's final summary, ``campaign-status --shared``): a person
    triaging dozens of GPU findings starts there. An error in it is data; it never costs the summary."""
    try:
        found, tested = shared_features(run_dir)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}
    return {"tested": tested, "found": [dataclasses.asdict(f) for f in found]}


def lines(held: dict) -> list[str]:
    """A ``summary()`` as lines a person reads."""
    if "error" in held:
        return [f"shared beyond chance: not computed ({held['error']})"]
    found = [SharedFeature(**f) for f in held["found"]]
    return [f"shared beyond chance ({len(found)} of {held['tested']} feature values tested; about 1 in 100 is chance):"] + \
        [f"  {f.line()}" for f in found]
