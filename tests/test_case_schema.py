"""The case schema: strict loading with one-line field errors, stable round trips."""
import pytest
from hypothesis import given, settings

from hybridfuzz.case import CaseError, dump_case, load_case
from hybridfuzz.strategies import cases, detect_platform

GOOD = """
model: {layers: [linear_attention, full_attention]}
engine: {kv_cache_dtype: fp8, enable_prefix_caching: true}
steps:
  - generate: {prompts: [[1, 2, 3], [4, 5]], max_tokens: 4}
  - reset_prefix_cache
  - sleep: {level: 2}
  - wake_up: {tags: [weights]}
oracle: {checks: [health, reference]}
expect: {0.32.0: pass}
"""

BAD = [
    ("model: {layers: [mamba]}\nsteps: [reset_prefix_cache]", "model.layers[0]"),
    ("model: {layers: []}\nsteps: [reset_prefix_cache]", "model.layers"),
    ("model: {layers: [linear_attention]}\nengine: {kv_cache_dtype: int3}\nsteps: [reset_prefix_cache]", "engine.kv_cache_dtype"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], max_tokens: many}}]", "steps[0].generate.max_tokens"),
    ("model: {}\nsteps: [{generate: {prompts: [[1, 600]]}}]", "steps[0].generate.prompts[0][1]"),
    ("model: {}\nsteps: [{teleport: {}}]", "steps[0]"),
    ("model: {}\nsteps: [reset_prefix_cache]\ncolour: blue", "colour"),
    ("model: {}\nengine: {block_size: 0}\nsteps: [reset_prefix_cache]", "engine.block_size"),
    ("model: {}\nsteps: [{sleep: {level: 7}}]", "steps[0].sleep.level"),
    ("model: {}\nsteps: [{wake_up: {tags: [gpu]}}]", "steps[0].wake_up.tags[0]"),
    ("model: {}\nsteps: [{wake_up: {tags: [kv_cache, kv_cache]}}]", "steps[0].wake_up.tags[1]"),
    ("model: {}\nsteps: [{reload_weights: {path: /tmp}}]", "steps[0].reload_weights.path"),
    ("model: {}\nsteps: [{submit: {prompts: []}}]", "steps[0].submit.prompts"),
    ("model: {}\nsteps: [{submit: {prompts: [[1, 600]]}}]", "steps[0].submit.prompts[0][1]"),
    ("model: {}\nengine: {enforce_eager: maybe}\nsteps: [reset_prefix_cache]", "engine.enforce_eager"),
    ("model: {}\nengine: {tensor_parallel_size: 4}\nsteps: [reset_prefix_cache]", "engine.tensor_parallel_size"),
    ("model: {hidden_size: 100000}\nsteps: [reset_prefix_cache]", "model.hidden_size"),
    ("model: {}\nsteps: [reset_prefix_cache]\noracle: {checks: [vibes]}", "oracle.checks[0]"),
    ("steps: [reset_prefix_cache]", "model"),
    ("model: {}", "steps"),
    ("model: [unclosed", "yaml"),
    ("- just\n- a list", ""),
    # the new dimensions (docs/dimensions.md)
    ("model: {}\nengine: {speculative_config: {method: eagle}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.method"),
    ("model: {}\nengine: {speculative_config: ngram}\nsteps: [reset_prefix_cache]", "engine.speculative_config"),
    ("model: {}\nengine: {speculative_config: {num_speculative_tokens: 8}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.num_speculative_tokens"),
    ("model: {}\nengine: {speculative_config: {num_speculative_tokens: 0}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.num_speculative_tokens"),
    ("model: {}\nengine: {speculative_config: {prompt_lookup_min: 0}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.prompt_lookup_min"),
    ("model: {}\nengine: {speculative_config: {prompt_lookup_min: 4, prompt_lookup_max: 2}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.prompt_lookup_min"),
    ("model: {}\nengine: {speculative_config: {method: draft_model, prompt_lookup_max: 2}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.prompt_lookup_max"),
    ("model: {}\nengine: {speculative_config: {method: ngram, draft: tiny}}\nsteps: [reset_prefix_cache]", "engine.speculative_config.draft"),
    ("model: {}\nengine: {async_scheduling: sometimes}\nsteps: [reset_prefix_cache]", "engine.async_scheduling"),
    ("model: {}\nengine: {num_gpu_blocks_override: 0}\nsteps: [reset_prefix_cache]", "engine.num_gpu_blocks_override"),
    ("model: {}\nengine: {scheduling_policy: lifo}\nsteps: [reset_prefix_cache]", "engine.scheduling_policy"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], temperature: -1}}]", "steps[0].generate.temperature"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], temperature: hot}}]", "steps[0].generate.temperature"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], seed: -3}}]", "steps[0].generate.seed"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], n: 0}}]", "steps[0].generate.n"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], prompt_logprobs: -1}}]", "steps[0].generate.prompt_logprobs"),
    ("model: {}\nsteps: [{generate: {prompts: [[1]], priority: 1}}]", "steps[0].generate.priority"),
    ("model: {}\nsteps: [{submit: {prompts: [[1]], advance: -1}}]", "steps[0].submit.advance"),
    ("model: {}\nsteps: [{abort: {requests: [0]}}]", "steps[0].abort.requests[0]"),
    ("model: {}\nsteps: [{submit: {prompts: [[1], [2]]}}, {abort: {requests: [1, 1]}}]", "steps[1].abort.requests[1]"),
    ("model: {}\nsteps: [{submit: {prompts: [[1]]}}, {abort: {requests: [-1]}}]", "steps[1].abort.requests[0]"),
    ("model: {}\nsteps: [{submit: {prompts: [[1]]}}, {abort: {requests: 0}}]", "steps[1].abort.requests"),
]


NEW_DIMENSIONS = """
model: {layers: [linear_attention, full_attention]}
engine: {speculative_config: {method: ngram, num_speculative_tokens: 3, prompt_lookup_min: 1}, async_scheduling: true,
         num_gpu_blocks_override: 8, scheduling_policy: priority}
steps:
  - submit: {prompts: [[1, 2, 3], [4, 5]], max_tokens: 4, advance: 2, priority: 1, temperature: 0.5, seed: 3, n: 2}
  - abort: {requests: [1]}
  - generate: {prompts: [[1, 2, 3]], prompt_logprobs: 2}
oracle: {checks: [health, spec_decode, async_scheduling, preemption, seeded_sampling, n_samples, abort],
         reference: {speculative_config: null, async_scheduling: false, num_gpu_blocks_override: null}}
"""


def test_new_dimensions_round_trip_stably():
    case = load_case(NEW_DIMENSIONS)
    once = dump_case(case)
    assert load_case(once) == case and dump_case(load_case(once)) == once
    assert case.engine.speculative_config.num_speculative_tokens == 3 and case.steps[0].advance == 2
    ref = case.reference_case()
    assert ref.engine.speculative_config is None and ref.engine.num_gpu_blocks_override is None
    assert ref.steps[1].requests == [] and ref.steps[0] == case.steps[0]  # the abort check's reference aborts nothing


def test_good_case_round_trips_stably():
    case = load_case(GOOD)
    once = dump_case(case)
    assert load_case(once) == case
    assert dump_case(load_case(once)) == once


@pytest.mark.parametrize("text,field", BAD)
def test_bad_case_gives_one_line_naming_the_field(text, field):
    with pytest.raises(CaseError) as err:
        load_case(text)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(field + ":") if field else True


@settings(max_examples=200, deadline=None)
@given(cases(detect_platform()))
def test_generated_cases_round_trip(case):
    text = dump_case(case)
    assert load_case(text) == case
    assert dump_case(load_case(text)) == text


def test_repeated_prompts_are_written_out_not_aliased():
    from hybridfuzz.case import Case, Generate
    from hybridfuzz.model import ModelSpec

    p = [5, 6, 7]
    text = dump_case(Case(ModelSpec(), [Generate([p, p]), Generate([p])]))
    assert "&id" not in text and "*id" not in text
    assert text.count("[5, 6, 7]") == 3
