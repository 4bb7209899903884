"""The prefix-cache effectiveness oracle on constructed traces (engine-free), and its place in judge."""
from hybridfuzz.case import Case, Generate, OracleSpec, ResetPrefixCache
from hybridfuzz.executor import judge
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.prefix_cache import check_prefix_cache, promised_hit
from hybridfuzz.trace import RequestResult, StepResult, Trace

LONG = list(range(3, 3 + 200))  # 200 tokens: more than one 128-token block
SHORT = list(range(3, 3 + 100))
ALIGN = {"enable_prefix_caching": True, "block_size": 128, "mamba_block_size": 128, "mamba_cache_mode": "align"}


def _case(*steps):
    return Case(model=ModelSpec(layers=("linear_attention", "full_attention")), steps=list(steps),
                oracle=OracleSpec(checks=["health", "self_consistency"]))


def _res(prompt, cached, tokens=(5, 6)):
    return RequestResult(prompt_len=len(prompt), tokens=list(tokens), logprobs=[[[t, -0.5]] for t in tokens],
                         num_cached_tokens=cached)


def _trace(settings, *steps):
    out = []
    for i, (kind, results) in enumerate(steps):
        out.append(StepResult(index=i, kind=kind, outputs=results))
    return Trace(outcome="ok", steps=out, engine_settings=settings, env={"device": "cpu"})


def test_repeat_without_hit_is_a_finding_of_its_own_class():
    case = _case(Generate(prompts=[LONG]), Generate(prompts=[LONG]))
    v = check_prefix_cache(case, _trace(ALIGN, ("generate", [_res(LONG, 0)]), ("generate", [_res(LONG, 0)])))
    assert v.status == "divergence" and v.oracle == "prefix_cache" and v.symptom == "never-hits"
    assert "prefix caching never hits" in v.summary


def test_repeat_with_hit_passes():
    case = _case(Generate(prompts=[LONG]), Generate(prompts=[LONG]))
    v = check_prefix_cache(case, _trace(ALIGN, ("generate", [_res(LONG, 0)]), ("generate", [_res(LONG, 128)])))
    assert v.status == "pass" and "1 repeated" in v.summary


def test_a_repeat_asking_for_prompt_logprobs_is_promised_no_hit():
    """vLLM skips reading the prefix cache for a request with prompt_logprobs (SamplingParams.skip_reading_prefix_cache)."""
    case = _case(Generate(prompts=[LONG]), Generate(prompts=[LONG], prompt_logprobs=1))
    v = check_prefix_cache(case, _trace(ALIGN, ("generate", [_res(LONG, 0)]), ("generate", [_res(LONG, 0)])))
    assert v.status == "pass", v
    again = _case(Generate(prompts=[LONG], prompt_logprobs=1), Generate(prompts=[LONG]))  # the repeat itself asks none
    assert check_prefix_cache(again, _trace(ALIGN, ("generate", [_res(LONG, 0)]), ("generate", [_res(LONG, 0)]))).status == "divergence"


def test_no_alarm_where_vllm_promises_no_hit():
    case = _case(Generate(prompts=[LONG]), Generate(prompts=[LONG]))
    two = (("generate", [_res(LONG, 0)]), ("generate", [_res(LONG, 0)]))
    assert check_prefix_cache(case, _trace({**ALIGN, "enable_prefix_caching": False}, *two)).status == "pass"
    assert check_prefix_cache(case, _trace({**ALIGN, "mamba_cache_mode": "none"}, *two)).status == "pass"
    # shorter than a block plus one token: the last token is always recomputed
    short = _case(Generate(prompts=[SHORT]), Generate(prompts=[SHORT]))
    assert check_prefix_cache(short, _trace(ALIGN, ("generate", [_res(SHORT, 0)]), ("generate", [_res(SHORT, 0)]))).status == "pass"
    # one batch: both requests run at once
    batch = _case(Generate(prompts=[LONG, LONG]))
    assert check_prefix_cache(batch, _trace(ALIGN, ("generate", [_res(LONG, 0), _res(LONG, 0)]))).status == "pass"
    # a reset in between drops the cache
    reset = _case(Generate(prompts=[LONG]), ResetPrefixCache(), Generate(prompts=[LONG]))
    assert check_prefix_cache(reset, _trace(ALIGN, ("generate", [_res(LONG, 0)]), ("reset_prefix_cache", []),
                                            ("generate", [_res(LONG, 0)]))).status == "pass"


def test_block_size_comes_from_the_engine_settings():
    assert promised_hit(200, ALIGN) and not promised_hit(200, {**ALIGN, "block_size": 256})
    assert not promised_hit(128, ALIGN) and promised_hit(129, ALIGN)


def test_never_masks_a_correctness_divergence():
    case = _case(Generate(prompts=[LONG]), Generate(prompts=[LONG]))
    first, later = _res(LONG, 0, tokens=(5, 6)), _res(LONG, 0, tokens=(7, 8))  # differs AND never hits
    v = judge(case, _trace(ALIGN, ("generate", [first]), ("generate", [later])), None)
    assert v.status == "divergence" and v.oracle == "self_consistency"
    only_cost = judge(case, _trace(ALIGN, ("generate", [first]), ("generate", [_res(LONG, 0)])), None)
    assert only_cost.oracle == "prefix_cache"
