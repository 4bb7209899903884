"""Step scripts: generate / sleep / wake_up / reset_prefix_cache sequences.

Prompts come from a small pool so that repeats (prefix-cache hits, first request
vs later ones) and overlaps (a prompt extending another) are common; lengths
cluster around block boundaries, where hybrid prefix caching changes path.
"""
from __future__ import annotations

from hypothesis import strategies as st

from hybridfuzz.case import Generate, ResetPrefixCache, Sleep, WakeUp

BOUNDARY_LENGTHS = (127, 128, 129, 255, 256, 257)


def prompt_lengths() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(1, 24), st.sampled_from(BOUNDARY_LENGTHS), st.integers(25, 300))


@st.composite
def prompt_pools(draw, vocab_size: int = 512) -> list[list[int]]:
    n = draw(st.integers(1, 3))
    pool = []
    for _ in range(n):
        length = draw(prompt_lengths())
        start = draw(st.integers(3, vocab_size - 1))
        step = draw(st.integers(0, 7))
        # An arithmetic walk over the vocabulary: readable in YAML, shrinks to a constant prompt.
        pool.append([3 + (start - 3 + i * step) % (vocab_size - 3) for i in range(length)])
    return pool


@st.composite
def prompts_from(draw, pool: list[list[int]]) -> list[int]:
    base = draw(st.sampled_from(pool))
    how = draw(st.sampled_from(["same", "prefix", "extend"]))
    if how == "prefix" and len(base) > 1:
        return base[: draw(st.integers(1, len(base) - 1))]
    if how == "extend":
        return base + draw(st.lists(st.integers(3, 40), min_size=1, max_size=40))
    return list(base)


@st.composite
def generate_steps(draw, pool: list[list[int]]) -> Generate:
    batch = draw(st.lists(prompts_from(pool), min_size=1, max_size=3))
    # 20 top logprobs (vLLM's default cap): the reference rule's top-k tests need room.
    return Generate(prompts=batch, max_tokens=draw(st.sampled_from([6, 2, 4, 8])), logprobs=20)


@st.composite
def sleep_wake(draw, platform_has_sleep: bool) -> list:
    level = draw(st.sampled_from([1, 2, 0]))
    mode = draw(st.sampled_from(["abort", "wait", "keep"]))
    if level == 0:
        tags = ["scheduling"]
    else:
        tags = draw(st.sampled_from([None, ["weights", "kv_cache"], ["kv_cache", "weights"]]))
    return [Sleep(level=level, mode=mode), WakeUp(tags=tags)]


@st.composite
def step_scripts(draw, max_steps: int = 6, vocab_size: int = 512, has_sleep: bool = False) -> list:
    pool = draw(prompt_pools(vocab_size))
    kinds = draw(st.lists(st.sampled_from(["generate", "sleep_wake", "reset"]), min_size=1, max_size=max_steps))
    steps: list = []
    for kind in kinds:
        if kind == "generate":
            steps.append(draw(generate_steps(pool)))
        elif kind == "sleep_wake":
            steps.extend(draw(sleep_wake(has_sleep)))
        else:
            steps.append(ResetPrefixCache())
    return steps
