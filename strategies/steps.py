"""Step scripts: generate / submit / sleep / wake_up / reset_prefix_cache / reload_weights sequences.

Prompts come from a small pool so that repeats (prefix-cache hits, first request
vs later ones) and overlaps (a prompt extending another) are common; lengths
cluster around block boundaries, where hybrid prefix caching changes path.
"""
from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from hybridfuzz import sleepwake
from hybridfuzz.case import Generate, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp

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


# Sleep/wake scripts: composite strategies, not a RuleBasedStateMachine. A state machine runs its rules
# against a live system inside Hypothesis; here a case must be a value first (YAML, run later on a
# fork-server child, a server or another vLLM version, shrunk and replayed as a file). A composite draws a
# list of actions and interprets each against hybridfuzz.sleepwake's state: deleting an action leaves the
# others meaningful (an action that does not fit the state is skipped, never rejected), so Hypothesis
# shrinks the list freely and every shrunk script is still a legal protocol.
# Generate first and most often (the outputs the oracles compare); reload_weights and submit are rarer.
# "repeat" sends an earlier generate again, verbatim: the self-consistency oracle compares identical
# requests only, and a fresh draw rarely repeats one (first request vs later, before vs after a sleep,
# a reset or a reload, a prefix-cache miss vs a hit), so repeats are drawn on purpose.
ACTIONS = ("generate", "repeat", "sleep", "wake_up", "generate", "repeat", "reset_prefix_cache", "sleep", "wake_up",
           "reload_weights", "submit")
# Simplest first: a full wake-up; then the partial ones, the orders, and the scheduling tag.
WAKE_TAGS = (None, ["kv_cache"], ["weights"], ["weights", "kv_cache"], ["kv_cache", "weights"], ["scheduling"],
             ["weights", "kv_cache", "scheduling"])


@st.composite
def sleep_steps(draw, host: sleepwake.Host = sleepwake.OFFLINE) -> Sleep:
    modes = ["abort", "keep", "wait"] if host.wait_mode else ["abort", "keep"]
    return Sleep(level=draw(st.sampled_from([1, 2, 0])), mode=draw(st.sampled_from(modes)))


@st.composite
def wake_steps(draw) -> WakeUp:
    tags = draw(st.sampled_from(WAKE_TAGS))
    return WakeUp(tags=list(tags) if tags is not None else None)


@st.composite
def submit_steps(draw, pool: list[list[int]]) -> Submit:
    """Long enough (64 tokens) to be still running when the next step is sent."""
    batch = draw(st.lists(prompts_from(pool), min_size=1, max_size=2))
    return Submit(prompts=batch, max_tokens=draw(st.sampled_from([64, 32])), logprobs=5)


@st.composite
def step_scripts(draw, max_steps: int = 6, vocab_size: int = 512, has_sleep: bool = False,
                 host: sleepwake.Host = sleepwake.OFFLINE, min_actions: int = 1) -> list:
    """A step script that follows the sleep/wake protocol (hybridfuzz/sleepwake.py): sleeps at every level
    and mode, partial and repeated wake-ups in any tag order, wakes while awake, sleeps while asleep,
    resets and reloads while partly asleep, reload_weights after a level-2 wake of the weights. A generate
    while the scheduler is paused becomes a submit on a host that has it and is skipped elsewhere (a blocking
    generate cannot return then). ``repeat`` sends an earlier generate again. A script that ends asleep gets
    a final full wake-up, so an engine that runs several cases (persistent mode) starts each awake.
    ``has_sleep`` is kept for callers: on CPU the protocol runs too (its sleep/wake are no-ops in the worker; the scheduler and the tags are real).
    ``min_actions``: draw at least this many actions (those that do not fit the state are still skipped)."""
    pool = draw(prompt_pools(vocab_size))
    actions = draw(st.lists(st.sampled_from(ACTIONS), min_size=min(min_actions, max_steps), max_size=max_steps))
    steps: list = []
    state = sleepwake.State()
    probe_due = False  # a protocol step followed a generate, and no request has run since
    for action in actions:
        earlier = [s for s in steps if isinstance(s, Generate)] if action == "repeat" else []
        if earlier:
            step = _resend(draw(st.sampled_from(earlier)))
        elif action in ("generate", "repeat"):
            step = draw(generate_steps(pool))
        elif action == "sleep":
            step = draw(sleep_steps(host))
        elif action == "wake_up":
            step = draw(wake_steps())
        elif action == "reset_prefix_cache":
            step = ResetPrefixCache()
        elif action == "reload_weights":
            step = ReloadWeights()
        else:
            step = draw(submit_steps(pool))
        if isinstance(step, Generate) and state.paused and host.submit:
            step = Submit(prompts=step.prompts, max_tokens=step.max_tokens, logprobs=step.logprobs)
        if sleepwake.expect(state, step, host).call in ("refused", "blocks", "misuse"):
            continue
        steps.append(step)
        state = sleepwake.apply(state, step, host)
        state, probe_due = _probe(steps, state, host, probe_due or isinstance(step, PROTOCOL_STEPS))
    if not steps:
        steps.append(draw(generate_steps(pool)))
    elif not state.awake:
        steps.append(WakeUp(tags=None))
        state = sleepwake.apply(state, steps[-1], host)
        probe_due = True
    _probe(steps, state, host, probe_due)
    return steps


def _resend(step: Generate) -> Generate:
    """The same request again, with its own prompt lists (shared lists would become YAML aliases)."""
    return dataclasses.replace(step, prompts=[list(p) for p in step.prompts])


PROTOCOL_STEPS = (Sleep, WakeUp, ResetPrefixCache, ReloadWeights)


def _probe(steps: list, state: sleepwake.State, host: sleepwake.Host, due: bool) -> tuple[sleepwake.State, bool]:
    """After a protocol step (sleep, wake, reset, reload), the first request that can run is the first
    generate again, appended in place: self-consistency compares identical requests only, and the first
    request after a transition is the one a bug there reaches (a reset or a wake that leaves stale state
    poisons the next new request, and later requests may not see it). Derived, not drawn, like the closing
    wake-up: shrinking removes the steps in between and the probe follows. Returns the state and whether a
    probe is still due (the engine cannot take a request yet, e.g. asleep)."""
    first = next((s for s in steps if isinstance(s, Generate)), None)
    if not due or first is None:
        return state, False  # protocol steps before the first request have nothing to compare against
    again = _resend(first)
    if sleepwake.expect(state, again, host).call != "succeeds":
        return state, True
    steps.append(again)
    return sleepwake.apply(state, again, host), False
