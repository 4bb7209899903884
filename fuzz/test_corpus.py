"""Replay every corpus case and check what it expects for the installed vLLM, on this machine.

What a machine must see comes from ``hybridfuzz.triage.reproduce.expectation``: a case that
expects ``divergence`` and records where it reproduces (CPU ISA class, k of N fresh
runs) is checked exactly there, with enough runs for its recorded rate; on a CPU
class where it was never recorded it is skipped with the reason, and so is a case
this machine's vLLM refuses to run (unsupported) unless that refusal is what was
recorded here. A fixed bug shows up as a failing expectation to update. Component
cases run no engine.
"""
import glob
import os

import pytest

from hybridfuzz.case import load_case_file
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import evaluate
from hybridfuzz.machine import cpu_isa
from hybridfuzz.triage.reproduce import expectation
from hybridfuzz.vllm_facts import vllm_version

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
LEDGER = os.path.join(ROOT, "bugs.yaml")  # the bug ledger (triage/ledger.py), not a case
CASES = sorted(p for p in glob.glob(os.path.join(ROOT, "**", "*.yaml"), recursive=True) if p != LEDGER)
KINDS = {p: load_case_file(p).kind for p in CASES}
ENGINE = [p for p in CASES if KINDS[p] == "engine"]
COMPONENT = [p for p in CASES if KINDS[p] == "component"]


def _ids(paths):
    return [os.path.relpath(p, ROOT) for p in paths]


def smoke_cases() -> set[str]:
    """The fast tier's corpus replay: the seeds, and for each bug of the ledger seen on a CPU, its smallest case seen
    there (one real engine run per bug); the slow tier replays every case."""
    from hybridfuzz.case import device_kind
    from hybridfuzz.triage.findings import case_size
    from hybridfuzz.triage.ledger import load_ledger

    out = {os.path.normpath(p) for p in ENGINE if os.path.relpath(p, ROOT).startswith("seeds" + os.sep)}
    for members in load_ledger(LEDGER, ROOT).members.values():
        on_cpu = [m for m in members if m.case.kind == "engine" and not hangs(m.case)
                  and any(device_kind(o.device) == "cpu" for o in m.case.observed)]
        if on_cpu:
            out.add(os.path.normpath(min(on_cpu, key=lambda m: case_size(m.case)).path))
    return out


# A case whose recorded divergence is a hang is replayed with this deadline: an engine without the bug finishes such a
# tiny case in seconds, and the hosts' 300 s would spend five minutes per hang. It stays out of the fast tier.
HANG_CHECK_S = 60.0


def hangs(case) -> bool:
    from hybridfuzz.triage.ledger import symptom_class

    return any(symptom_class(o.signature) == "hang" for o in case.observed if o.verdict == "divergence")


SMOKE = smoke_cases()


def _check(path, host: Host) -> None:
    case = load_case_file(path)
    exp = expectation(case, vllm_version(), cpu_isa())
    if exp.skip:
        pytest.skip(exp.skip.replace("{case}", os.path.relpath(path)))
    if "HYBRIDFUZZ_FAULT" in os.environ:
        pytest.skip("a fault is injected: expectations describe the unmodified engine")
    seen = []
    for _ in range(exp.runs):
        v = evaluate(case, host, timeout=HANG_CHECK_S if hangs(case) else None).verdict
        seen.append(v.one_line())
        if v.status == "unsupported" and exp.verdict != "unsupported":  # this machine cannot run it: nothing to check
            pytest.skip(f"this machine ({cpu_isa()}) cannot run it: {v.summary[:200]}")
        if v.status == exp.verdict and exp.verdict == "divergence":
            return
        if v.status != "divergence" and exp.verdict != "divergence":
            assert v.status == exp.verdict, f"{path}: expected {exp.verdict} ({exp.why}), got {v.one_line()}"
            return
    pytest.fail(f"{path}: expected {exp.verdict} ({exp.why}) in {exp.runs} fresh run(s) on {cpu_isa()}, got: " + " | ".join(seen))


@pytest.mark.engine
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.smoke) if os.path.normpath(p) in SMOKE else p for p in ENGINE],
                         ids=_ids(ENGINE))
def test_corpus_case_matches_expectation(replay_host, path):
    _check(path, replay_host)


@pytest.mark.parametrize("path", COMPONENT, ids=_ids(COMPONENT))
def test_component_case_matches_expectation(path):
    _check(path, None)


@pytest.mark.parametrize("path", ENGINE, ids=_ids(ENGINE))
def test_cpu_divergence_says_where_it_reproduces(path):
    """#14 defect 1: a CPU divergence expectation records the ISA class it was seen on, so another x86 machine
    checks it only where it holds."""
    case = load_case_file(path)
    for version, verdict in case.expect.items():
        cpu = [o for o in case.observed if o.vllm == version and o.device == "cpu"]
        if verdict == "divergence" and cpu:
            assert any(o.isa for o in cpu), f"{path}: vLLM {version} divergence observed on CPU without the ISA class (replay --runs 3 --record)"
