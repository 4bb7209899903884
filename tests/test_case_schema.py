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
]


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
