"""Run one case on vLLM's offline ``LLM`` inside the current process.

Used by every host (fork-server child, naive subprocess). Exceptions become
data in the Trace; this module never raises out of ``run_case``.
"""
from __future__ import annotations

import inspect
import os
import re
import time
import traceback
from typing import Any

from hybridfuzz.case import STEP_NAMES, Case, EngineConfig, Generate, ResetPrefixCache, Sleep, WakeUp
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace

# A small explicit KV-cache size: start-up skips the memory profiling (and its
# zeroing of a GiB on CPU), and parallel engines on one GPU cannot race in it.
DEFAULT_KV_CACHE_BYTES = 64 * 1024 * 1024
# Start-up refusals that mean "this platform/config is not supported": not findings.
REJECTION_TYPES = ("ValueError", "NotImplementedError", "ValidationError", "ImportError", "ModuleNotFoundError")
# A step the engine refuses in so many words ("'wait' pause mode is not supported in
# inproc-engine mode") is a refusal too, not a finding.
REFUSAL = re.compile(r"not (supported|enabled|available|allowed)|unsupported", re.IGNORECASE)


_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _short_path(filename: str) -> str:
    """vllm/... for installed packages, hybridfuzz/... for this checkout, wherever they live."""
    return filename.split("site-packages/")[-1].removeprefix(_CHECKOUT)


def error_info(exc: BaseException) -> ErrorInfo:
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:  # the innermost frame: where the exception was raised
        fr = frames[-1]
        where = f"{_short_path(fr.filename)}:{fr.lineno} in {fr.name}"
    return ErrorInfo(type=type(exc).__name__, message=str(exc)[:2000], where=where)


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
    for name in ("attention_backend", "enable_prefix_caching", "block_size", "mamba_cache_mode"):
        value = getattr(engine, name)
        if value is not None:
            kw[name] = value
    kw.update(engine.extra)
    return kw


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


def _request_result(req) -> RequestResult:
    comp = req.outputs[0]
    lps = []
    for pos in comp.logprobs or []:
        ranked = sorted(pos.items(), key=lambda kv: (-kv[1].logprob, kv[0]))
        lps.append([[int(t), float(lp.logprob)] for t, lp in ranked])
    return RequestResult(prompt_len=len(req.prompt_token_ids or []), tokens=list(comp.token_ids), logprobs=lps,
                         num_cached_tokens=getattr(req, "num_cached_tokens", None))


def _run_step(llm, step) -> list[RequestResult]:
    if isinstance(step, Generate):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=step.max_tokens, logprobs=step.logprobs, ignore_eos=True)
        outs = llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in step.prompts], params, use_tqdm=False)
        return [_request_result(o) for o in outs]
    if isinstance(step, Sleep):
        if "mode" in inspect.signature(llm.sleep).parameters:
            llm.sleep(level=step.level, mode=step.mode)
        else:  # older vLLM: no pause mode
            llm.sleep(level=step.level)
        return []
    if isinstance(step, WakeUp):
        llm.wake_up(tags=list(step.tags) if step.tags is not None else None)
        return []
    if isinstance(step, ResetPrefixCache):
        llm.reset_prefix_cache()
        return []
    raise TypeError(f"unknown step {step!r}")  # pragma: no cover


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


def run_case(case: Case) -> Trace:
    """Start a fresh engine for the case, run its steps, and describe what happened."""
    from hybridfuzz.model import build_model

    trace = Trace()
    t0 = time.perf_counter()
    try:
        trace.env = environment()
        model_dir = str(build_model(case.model))
        from vllm import LLM

        for k, v in case.engine.env.items():
            os.environ[k] = v
        kwargs = engine_kwargs(case.engine, model_dir, device_kind())
        from hybridfuzz.vllm_facts import engine_arg_names

        # Our own defaults that this vLLM does not know are dropped; the case's own knobs never are.
        own = {"kv_cache_memory_bytes", "additional_config"} - set(case.engine.extra)
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
        trace.outcome = "rejected" if info.type in REJECTION_TYPES else "error"
        trace.error = info
        trace.timings["startup_s"] = time.perf_counter() - t0
        return trace
    trace.timings["startup_s"] = time.perf_counter() - t0
    trace.engine_settings = {**trace.engine_settings, **_engine_settings(llm)}
    if dropped:
        trace.engine_settings["dropped_defaults"] = dropped
    for i, step in enumerate(case.steps):
        ts = time.perf_counter()
        result = StepResult(index=i, kind=STEP_NAMES[type(step)])
        try:
            result.outputs = _run_step(llm, step)
        except Exception as e:
            result.error = error_info(e)
        result.seconds = time.perf_counter() - ts
        trace.steps.append(result)
        if result.error:
            refused = result.error.type in REJECTION_TYPES and REFUSAL.search(result.error.message)
            trace.outcome = "rejected" if refused else "error"
            trace.error = result.error
            break
    trace.timings["steps_s"] = sum(s.seconds for s in trace.steps)
    trace.timings["total_s"] = time.perf_counter() - t0
    return trace
