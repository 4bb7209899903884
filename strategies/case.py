"""Whole cases: a model, an engine config and a step script, with all checks on."""
from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, OracleSpec
from hybridfuzz.strategies.engine import engine_configs, tensor_parallel_sizes
from hybridfuzz.strategies.features import feature_steps, with_new_dimensions
from hybridfuzz.strategies.model import family_engine_extra, model_specs
from hybridfuzz.strategies.platform import Platform
from hybridfuzz.strategies.steps import step_scripts

ALL_CHECKS = ["health", "self_consistency", "reference"]


@st.composite
def cases(draw, platform: Platform, max_layers: int = 8, max_steps: int = 6, host: sleepwake.Host = sleepwake.OFFLINE) -> Case:
    """``host``: what the engine host can do with the sleep/wake protocol (sleepwake.SERVER: submit, mode wait)."""
    tp = draw(tensor_parallel_sizes(platform))
    model = draw(model_specs(max_layers, platform.families, tp))
    engine = draw(engine_configs(platform))
    family_extra = draw(family_engine_extra(model))  # e.g. mamba_ssm_cache_dtype (strategies/model.py)
    engine = dataclasses.replace(engine, extra={**engine.extra, **family_extra}) if family_extra else engine
    steps = draw(step_scripts(max_steps, model.vocab_size, platform.has_sleep_mode, host))
    # Two GPUs against one: a TP=2 case's reference is the same case on a single GPU (and KV dtype auto, as always).
    reference = {**OracleSpec().reference, **({"tensor_parallel_size": 1} if tp > 1 else {})}
    case = Case(model=model, engine=dataclasses.replace(engine, tensor_parallel_size=tp), steps=steps,
                oracle=OracleSpec(checks=list(ALL_CHECKS), reference=reference))
    return draw(with_new_dimensions(case, platform, host))  # strategies/features.py: spec, preemption, sampling, aborts


@st.composite
def sessions(draw, platform: Platform, max_layers: int = 8, max_steps: int = 6, max_cases: int = 1,
             host: sleepwake.Host = sleepwake.OFFLINE) -> list[Case]:
    """Persistent mode: 1..max_cases cases that share model and engine, for one warm engine.

    The first case is an ordinary ``cases()`` draw; the others draw only new step scripts.
    A session is always full: engine starts are what a campaign runs short of (issue #12), and with
    lists free to be short most sessions held one case. Findings are not shrunk through this list:
    a warm divergence is confirmed on a fresh engine as one case, and that case is what is shrunk.
    """
    first = draw(cases(platform, max_layers, max_steps, host))
    if max_cases <= 1:
        return [first]
    # Later cases draw at least half the step budget: a warm engine's time is cheap, and with Hypothesis
    # free to keep them short, 79 % of a GPU campaign's cases held one step (2026-11-30, vLLM 0.26.0).
    longer = step_scripts(max_steps, first.model.vocab_size, platform.has_sleep_mode, host, min_actions=max(1, max_steps // 2))
    scripts = draw(st.lists(longer,
                            min_size=max_cases - 1, max_size=max_cases - 1))
    more = [draw(feature_steps(first.engine, first.model.vocab_size)) for _ in scripts]  # strategies/features.py
    return [first] + [first.replace(steps=steps + extra) for steps, extra in zip(scripts, more)]
