"""Reproduction rates and per-machine expectations (#14 defects 1 and 2), without engines."""
from __future__ import annotations

import dataclasses

import pytest

from hybridfuzz.case import CaseError, Observation, dump_case, load_case
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.triage.reproduce import MAX_RUNS, expectation, runs_for, summarize
from hybridfuzz.triage.status import group, load_entries

CASE = """\
model: {layers: [linear_attention, full_attention]}
engine: {kv_cache_dtype: fp8_ds_mla}
steps: [{generate: {prompts: [[3]]}}]
expect: {0.32.0: divergence}
"""


def _case(*observed: Observation):
    return load_case(CASE).replace(observed=list(observed))


def obs(isa: str, runs: int, hits: int, **kw) -> Observation:
    return Observation(vllm="0.32.0", verdict="divergence" if hits else "pass", isa=isa, runs=runs, reproduced=hits, **kw)


@pytest.mark.parametrize("observed, isa, verdict, runs", [
    ([], "x86_64/avx2", "divergence", 1),  # no per-machine record: must reproduce anywhere (the old rule)
    ([obs("x86_64/avx2", 3, 3)], "x86_64/avx2", "divergence", 1),
    ([obs("x86_64/avx2", 3, 3)], "x86_64/avx512_bf16+amx", None, 1),  # the AVX-512/AMX machine of #14: not checked there
    ([obs("x86_64/avx2", 3, 3), obs("x86_64/avx512_bf16+amx", 3, 0)], "x86_64/avx512_bf16+amx", "pass", 1),
    ([obs("x86_64/avx2", 4, 2)], "x86_64/avx2", "divergence", 6),  # half the time: 6 runs miss it with p < 1 %... at most 6
    ([obs("x86_64/avx2", 3, 2)], "x86_64/avx2", "divergence", 5),
    # fp8_ds_mla on this AVX2 box: vLLM refuses an fp8 KV cache at start-up ("requires x86 with AVX-512 or AMX")
    ([dataclasses.replace(obs("x86_64/avx2", 3, 0), verdict="unsupported")], "x86_64/avx2", "unsupported", 1),
])
def test_expectation_per_machine(observed, isa, verdict, runs):
    exp = expectation(_case(*observed), "0.32.0", isa)
    assert (exp.verdict, exp.runs if verdict else 1) == (verdict, runs), exp.why
    if verdict is None:
        assert "x86_64/avx2: 3/3" in exp.skip and isa in exp.skip


def test_machines_of_one_class_that_disagree_assert_nothing():
    """A case that passed on one AVX2 machine and diverged on another: the CPU class does not decide it, so the
    corpus skips it there with the reason, instead of failing on one of the two machines."""
    exp = expectation(_case(obs("x86_64/avx2", 1, 0), obs("x86_64/avx2", 3, 3)), "0.32.0", "x86_64/avx2")
    assert exp.verdict is None and "disagree" in exp.skip and "3 of 4" in exp.skip, exp.why
    one_machine = expectation(_case(obs("x86_64/avx2", 3, 2)), "0.32.0", "x86_64/avx2")  # a rate, not a disagreement
    assert one_machine.verdict == "divergence"


def test_recording_keeps_a_disagreeing_machine_of_the_same_class():
    """``replay --record`` replaces the record of its own verdict on this class and keeps one of another verdict,
    so the disagreement, once seen, stays in the file."""
    from hybridfuzz.triage.findings import with_observation

    case = _case(obs("x86_64/avx2", 1, 0), obs("x86_64/avx512_bf16", 3, 3))
    case = with_observation(case, obs("x86_64/avx2", 3, 3))
    assert [(o.isa, o.verdict) for o in case.observed] == [
        ("x86_64/avx2", "pass"), ("x86_64/avx512_bf16", "divergence"), ("x86_64/avx2", "divergence")]
    case = with_observation(case, obs("x86_64/avx2", 3, 2))  # the same machine again: its own record is replaced
    assert [(o.isa, o.verdict, o.reproduced) for o in case.observed][-1] == ("x86_64/avx2", "divergence", 2)
    assert len(case.observed) == 3
    # another symptom on the same machine stays beside it: a finding once seen is not overwritten by runs that missed it
    other = obs("x86_64/avx2", 3, 3, signature="reference:beyond-noise:9c47a48c")
    case = with_observation(case, other)
    assert [(o.isa, o.verdict, o.signature) for o in case.observed][-2:] == [
        ("x86_64/avx2", "divergence", ""), ("x86_64/avx2", "divergence", other.signature)]
    assert len(case.observed) == 4


def test_pass_and_missing_expectations():
    case = load_case(CASE.replace("divergence", "pass"))
    assert expectation(case, "0.32.0", "x86_64/avx2").verdict == "pass"
    assert expectation(case, "0.26.0", "x86_64/avx2").skip.startswith("no expectation")


def test_runs_for_bounds_the_miss_probability():
    assert runs_for(1.0) == 1 and runs_for(0.0) == 0
    for rate in (0.2, 0.34, 0.5, 0.67, 0.9):
        n = runs_for(rate)
        assert n == MAX_RUNS or (1 - rate) ** n <= 0.01 < (1 - rate) ** (n - 1)


def test_summary_of_runs_keeps_every_symptom():
    """The nvfp4 case of #14: NaN in two runs, SIGILL at start-up in the third: one observation, one finding."""
    nan = Verdict("divergence", "health", "non-finite logprob", symptom="nonfinite", where="generate")
    sigill = Verdict("divergence", "health", "case crash at start-up", symptom="crash:SIGILL", where="start-up:")
    ok = Verdict("pass", "health", "fine")
    o = summarize([nan, sigill, ok, nan], {"vllm": "0.32.0", "device": "cpu", "torch": "2.13.0+cpu"})
    assert (o.verdict, o.runs, o.reproduced, o.signature, o.symptoms) == ("divergence", 4, 3, nan.signature, [sigill.signature])
    assert o.signature_runs == 2  # the shown signature's own count, beside the 3 that diverged
    assert o.isa  # the CPU's ISA class is recorded with a CPU observation
    again = load_case(dump_case(_case(o)))
    assert again.observed == [o]
    single = summarize([ok], {"vllm": "0.32.0", "device": "cpu"})
    assert (single.verdict, single.runs, single.reproduced, single.reproductions) == ("pass", 1, None, 0)


@pytest.mark.parametrize("fields, message", [
    ({"runs": 0}, "observed[0].runs: must be >= 1"),
    ({"runs": 2, "reproduced": 3}, "observed[0].reproduced: must be 0 to runs (2)"),
    ({"runs": 2, "reproduced": 0, "verdict": "divergence"}, "observed[0].reproduced: 0 of 2 runs diverged, but verdict is divergence"),
    ({"runs": 3, "reproduced": 2, "verdict": "divergence", "signature_runs": 3},
     "observed[0].signature_runs: must be 1 to the runs that diverged (2)"),
])
def test_observation_rate_is_checked_on_load(fields, message):
    o = {"vllm": "0.32.0", "verdict": "pass", **fields}
    text = CASE + "observed:\n- " + ", ".join(f"{k}: {v}" for k, v in o.items()).replace(", ", "\n  ") + "\n"
    with pytest.raises(CaseError) as e:
        load_case(text)
    assert str(e.value).startswith(message)


def test_triage_groups_a_cases_symptoms_as_one_finding(tmp_path):
    """Two files, one recording NaN (and SIGILL as another symptom), the other found by its SIGILL: one group."""
    nan = Verdict("divergence", "health", "non-finite logprob", symptom="nonfinite", where="generate")
    sigill = Verdict("divergence", "health", "case crash at start-up", symptom="crash:SIGILL", where="start-up:")
    a = summarize([nan, sigill, nan], {"vllm": "0.32.0", "device": "cpu"})
    b = dataclasses.replace(summarize([sigill], {"vllm": "0.32.0", "device": "cpu"}))
    (tmp_path / "a.yaml").write_text(dump_case(_case(a)))
    (tmp_path / "b.yaml").write_text(dump_case(_case(b)))
    groups, clean = group(load_entries([str(tmp_path)]))
    assert len(groups) == 1 and len(groups[0].entries) == 2 and not clean


def test_known_signatures_are_kept_per_kind_of_device(tmp_path):
    """A signature names the oracle, symptom and place, not the bug: the same one filed from a CPU run must not make
    a GPU campaign skip its own divergences (9c47a48c, 2026-12-04), and a case seen on both counts for both."""
    from hybridfuzz.triage.findings import known_signatures

    flip = Verdict("divergence", "reference", "token 0 off the reference", symptom="beyond-noise", where="generate")
    crash = Verdict("divergence", "health", "case crash", symptom="crash:SIGABRT", where="generate")
    cpu = summarize([flip], {"vllm": "0.32.0", "device": "cpu"})
    gpu = summarize([crash], {"vllm": "0.33.0", "device": "NVIDIA H200"})
    (tmp_path / "cpu.yaml").write_text(dump_case(_case(cpu)))
    (tmp_path / "both.yaml").write_text(dump_case(_case(cpu, gpu)))
    on_cpu, on_gpu = known_signatures(str(tmp_path), on="cpu"), known_signatures(str(tmp_path), on="gpu")
    assert on_cpu == {cpu.signature} and on_gpu == {gpu.signature}
    assert known_signatures(str(tmp_path)) == on_cpu | on_gpu


def test_a_shrink_gives_a_sometimes_finding_the_tries_its_recorded_rate_needs():
    """The rate comes from the runs the file records on this kind of device: counted signature runs where an
    observation has them, every diverged run where it does not, a symptom seen beside another once, passes as misses."""
    from hybridfuzz.triage.reproduce import recorded_rate, shrink_tries

    sig = "self_consistency:reload-differs:b32759bc"
    case = load_case(CASE + f"""observed:
- {{vllm: 0.33.0, verdict: divergence, device: NVIDIA H200, signature: '{sig}'}}
- {{vllm: 0.33.0, verdict: pass, device: NVIDIA H200}}
- {{vllm: 0.33.0, verdict: divergence, device: NVIDIA H100, signature: '{sig}', runs: 6, reproduced: 4, signature_runs: 3,
   symptoms: ['reference:beyond-noise:9c47a48c']}}
- {{vllm: 0.33.0, verdict: divergence, device: NVIDIA H100, signature: 'reference:beyond-noise:9c47a48c', runs: 2,
   reproduced: 2, symptoms: ['{sig}']}}
- {{vllm: 0.32.0, verdict: divergence, isa: x86_64/avx2, signature: '{sig}', runs: 3, reproduced: 3}}
""")
    assert recorded_rate(case, sig, "gpu") == (1 + 0 + 3 + 1, 1 + 1 + 6 + 2)
    assert recorded_rate(case, sig, "cpu") == (3, 3)
    assert recorded_rate(case, sig, "cpu", [sig, "health:crash:SIGABRT:0"]) == (4, 5)  # plus fresh runs just made
    # the shrink's first runs, before it gives up on a recorded finding, follow the same rule, never fewer than 3
    from hybridfuzz.cli.shrink import RECORDED_TRIES, first_runs

    assert first_runs(case, [sig], "gpu") == shrink_tries(5, 10) > RECORDED_TRIES
    assert first_runs(case, [sig], "cpu") == RECORDED_TRIES and first_runs(case, [], "gpu") == RECORDED_TRIES
    assert shrink_tries(5, 10) == runs_for(0.5) == MAX_RUNS
    assert shrink_tries(3, 3) == 1 and shrink_tries(0, 0) == 1 and shrink_tries(1, 3) == runs_for(1 / 3)
