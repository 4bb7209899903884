"""Outcome memory: what a configuration is known to do before it runs, learnt from what ran.

Two outcomes cost engine starts and teach nothing new once seen:
- a *refusal* at start-up (vLLM's config validation and backend selection read only the model and engine settings);
- a *known bug that stops the engine* (a known or claimed signature: an engine error, crash or hang), after which
  the rest of the session needs a fresh engine.
In the H200 campaign of 2026-12-01 (results/2026-12-01-h200-vllm0.26.0-0.32.0-campaigns-and-shrinks/, vLLM 0.26.0) refusals took 26 % of the
workers' session time (28 sessions, median 23 s; a memory of exact configurations answered 5 of them), and 104 of
the 187 case-engine lifetimes ended at one of four signatures already found, each followed by a fresh engine.

Each outcome (a refusal reason, or a signature) keeps its *sightings*: the features of each case that ended so
(family, layers, every model and engine setting but the seeds) and the shapes of its steps up to the failing one.
Its rule starts as their least general generalization: the settings all sightings share, and any of their step
patterns (a subsequence of a case's step shapes, engines/base.py ``step_shapes``: kinds with the sleep level and
the woken tags; none for a start-up failure). With one sighting that is the exact
configuration; sightings that differ in a setting drop it. A rule predicts from ``MIN_SIGHTINGS`` on (1 for a
refusal, which is deterministic; 3 for a bug, whose triggers vary).

Two guards keep a rule from reaching too far. The configurations this worker saw run are counter-examples
(those that started, for a refusal; those that ran a pattern's steps and passed, for a stop), and so are the
checked predictions that did not come true, which all workers share (a *miss*, kept in the rule's folder): while the rule
covers one, a dropped setting is taken back as "one of the values its sightings had", the one that excludes
the most counter-examples first (fp8 and fp8_e4m3 sightings of a wake-up crash keep the KV dtype to those two
once an auto-KV case is seen to sleep and wake). A rule that still covers one is not used: only the exact
configurations sighted are then foreseen, and only for a refusal, which is deterministic. And a predicted
case is left out except ``CHECK`` of them (seeded), which run anyway: a checked case that ends otherwise (a
refused configuration that starts; a case foreseen to stop that passes) is a miss, and narrows the rule or, when
nothing tells it from the sightings, leaves it unused. (Patterns were step kinds, and one miss retired a rule
for good: in the H200 0.26.0 campaign of 2026-12-01 the fp8 wake-up crash's rule covered sleep/wake cases that
passed (84; kinds cannot tell a level-0 sleep or a weights-only wake-up from the crash's), foresaw little, was retired after 27 sightings, and the crash stopped 70 engines;
results/2026-12-01-h200-vllm0.26.0-0.32.0-engine-lives-float32/.) Signatures not yet found are never avoided.

Files under DIR (one per sighting or miss, written atomically): all workers of a campaign share them, and a
restarted worker keeps them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections import deque
from dataclasses import dataclass

from hybridfuzz.case import Case
from hybridfuzz.engines.base import contains_pattern, refusal_reason, step_shapes, stop_pattern
from hybridfuzz.failures import shortage
from hybridfuzz.store import write_atomic
from hybridfuzz.trace import Trace

MIN_SIGHTINGS = {"refused": 1, "stops": 3}
SEEN_RUNS = 2000  # the configurations a worker remembers having run, as evidence against a rule
CHECK = 0.1  # share of predicted cases run anyway, to catch a rule that is wrong
ABSENT = "-"  # the value of a setting a case does not have (an ``extra`` or ``env`` key)
REFUSED = "refused:"  # the prefix of a refusal's key; other keys are signatures
# Health symptoms after which the engine is gone and the session goes on on a fresh one (oracles/health.py).
STOPPING = ("error:", "crash:", "timeout:")


def features(case: Case) -> dict[str, str]:
    """What a configuration is, setting by setting (JSON values); the seeds, which never decide, left out."""
    out = {"model.layers": json.dumps(list(case.model.layers)), "model.layer_kinds": json.dumps(sorted(set(case.model.layers)))}
    for prefix, obj in (("model", case.model), ("engine", case.engine)):
        for k, v in dataclasses.asdict(obj).items():
            if k not in ("seed", "layers", "extra", "env"):
                out[f"{prefix}.{k}"] = json.dumps(v, sort_keys=True, default=str)
    out.update({f"extra.{k}": json.dumps(v, sort_keys=True, default=str) for k, v in case.engine.extra.items()})
    out.update({f"env.{k}": json.dumps(v) for k, v in case.engine.env.items()})
    return out


def is_refusal(key: str) -> bool:
    return key.startswith(REFUSED)


def refused_at_start(trace: Trace) -> bool:
    """A refusal worth remembering: refused at start-up, not for want of resources."""
    return trace.outcome == "rejected" and not trace.steps and trace.error is not None and not shortage(trace.error)


def stops_engine(symptom: str) -> bool:
    return symptom.startswith(STOPPING)


@dataclass
class Rule:
    key: str  # REFUSED + a refusal reason, or a signature
    settings: dict[str, set[str]]  # setting -> the values allowed (one: what every sighting shared)
    patterns: set[tuple[str, ...]]
    sightings: list[dict[str, str]]  # each sighting's settings
    misses: list[tuple[dict[str, str], list[str]]]  # checked predictions that did not come true: settings, step shapes
    contradicted: bool = False  # the generalization covers a configuration seen to run (``OutcomeMemory.rules``)

    @property
    def refusal(self) -> bool:
        return is_refusal(self.key)

    @property
    def ready(self) -> bool:
        return len(self.sightings) >= MIN_SIGHTINGS["refused" if self.refusal else "stops"]

    def covers(self, feats: dict[str, str], kinds: list[str]) -> bool:
        """The generalization: every shared setting, and one of the step patterns."""
        if any(feats.get(k, ABSENT) not in v for k, v in self.settings.items()):
            return False
        return () in self.patterns or any(contains_pattern(kinds, p) for p in self.patterns)

    def foresees(self, feats: dict[str, str], kinds: list[str]) -> bool:
        """For a case's ``features`` and ``step_shapes``."""
        if not self.ready:
            return False
        if not self.contradicted and self.covers(feats, kinds):
            return True
        return self.refusal and feats in self.sightings  # a refusal of this very configuration: always


@dataclass(frozen=True)
class Prediction:
    key: str
    checked: bool  # True: run anyway, to check the rule


class OutcomeMemory:
    def __init__(self, directory: str, seed: int = 0):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._rng = random.Random(seed)
        self._started: deque[dict[str, str]] = deque(maxlen=SEEN_RUNS)  # configurations that started (not refused)
        self._passed: deque[tuple[dict[str, str], list[str]]] = deque(maxlen=SEEN_RUNS)  # ... and ran to the end
    # ------------------------------------------------------------ learning

    def _dir(self, key: str) -> str:
        d = os.path.join(self.directory, hashlib.sha1(key.encode()).hexdigest()[:16])
        if not os.path.exists(os.path.join(d, "key.json")):
            os.makedirs(d, exist_ok=True)
            write_atomic(os.path.join(d, "key.json"), json.dumps({"key": key}))
        return d

    def _sight(self, key: str, case: Case, pattern: tuple[str, ...]) -> None:
        blob = json.dumps({"settings": features(case), "pattern": list(pattern)}, sort_keys=True)
        write_atomic(os.path.join(self._dir(key), f"s-{hashlib.sha1(blob.encode()).hexdigest()[:16]}.json"), blob)

    def learn(self, case: Case, trace: Trace, signature: str = "", symptom: str = "") -> None:
        """One run's outcome: a refusal at start-up, or an engine-stopping signature (verdict ``signature`` and
        ``symptom``) at the step that failed. Anything else teaches nothing here."""
        feats = features(case)
        if trace.outcome != "rejected":
            self._started.append(feats)
        if trace.outcome == "ok" and not signature:
            self._passed.append((feats, step_shapes(case)))
        if refused_at_start(trace):
            self._sight(REFUSED + refusal_reason(trace.error), case, ())
        elif signature and stops_engine(symptom) and trace.outcome in ("error", "crash", "timeout"):
            # the case's own engine stopped (not its reference)
            self._sight(signature, case, stop_pattern(case, trace, step_shapes))

    def miss(self, key: str, case: Case) -> None:
        """A checked prediction that did not come true: a counter-example to the rule, for every worker."""
        blob = json.dumps({"settings": features(case), "shapes": step_shapes(case)}, sort_keys=True)
        write_atomic(os.path.join(self._dir(key), f"m-{hashlib.sha1(blob.encode()).hexdigest()[:16]}.json"), blob)

    def rules(self) -> list[Rule]:
        out = []
        for name in sorted(os.listdir(self.directory)):
            d = os.path.join(self.directory, name)
            try:
                with open(os.path.join(d, "key.json")) as f:
                    key = json.load(f)["key"]
                seen, misses = [], []
                for fn in sorted(os.listdir(d)):
                    if fn.startswith(("s-", "m-")) and fn.endswith(".json"):
                        with open(os.path.join(d, fn)) as f:
                            record = json.load(f)
                        if fn.startswith("s-"):
                            seen.append(record)
                        else:
                            misses.append((record["settings"], record["shapes"]))
            except (OSError, ValueError, KeyError):
                continue  # a rule being written by another worker: next time
            if not seen:
                continue
            keys = set().union(*(s["settings"] for s in seen))
            values = {k: {s["settings"].get(k, ABSENT) for s in seen} for k in keys}
            rule = Rule(key, {k: v for k, v in values.items() if len(v) == 1}, {tuple(s["pattern"]) for s in seen},
                        [s["settings"] for s in seen], misses)
            self._specialize(rule, {k: v for k, v in values.items() if len(v) > 1})
            out.append(rule)
        return out

    def _specialize(self, rule: Rule, dropped: dict[str, set[str]]) -> None:
        """Take dropped settings back (as the values the sightings had) while the rule covers a configuration
        seen to run or a miss; mark it contradicted if one is still covered."""
        if rule.refusal:
            ran = [(f, []) for f in self._started]
        else:
            ran = list(self._passed)
        covered = [f for f, shapes in ran + rule.misses if rule.covers(f, shapes)]
        while covered and dropped:
            best = max(sorted(dropped), key=lambda k: sum(f.get(k, ABSENT) not in dropped[k] for f in covered))
            if not any(f.get(best, ABSENT) not in dropped[best] for f in covered):
                break  # no setting the sightings varied in tells them apart
            rule.settings[best] = dropped.pop(best)
            covered = [f for f in covered if f.get(best, ABSENT) in rule.settings[best]]
        rule.contradicted = bool(covered)

    # ------------------------------------------------------------ predicting

    def predict(self, case: Case, rules: list[Rule], avoidable=lambda key: False) -> Prediction | None:
        """The outcome a ready rule predicts for this case: a refusal, or a signature ``avoidable(key)`` says was
        found already; None when no rule applies. One in ``CHECK`` predictions is marked to run anyway."""
        feats, kinds = features(case), step_shapes(case)
        for rule in rules:
            if (rule.refusal or avoidable(rule.key)) and rule.foresees(feats, kinds):
                return Prediction(rule.key, checked=self._rng.random() < CHECK)
        return None

    def verify(self, prediction: Prediction, case: Case, trace: Trace, signature: str) -> None:
        """A checked prediction against what ran: a refusal that did not come, or a stop that did not come and a
        case that passed instead (another failure first says nothing), is a miss."""
        if is_refusal(prediction.key):
            if trace.outcome != "rejected" or trace.steps:
                self.miss(prediction.key, case)
        elif trace.outcome == "ok" and not signature:
            self.miss(prediction.key, case)
