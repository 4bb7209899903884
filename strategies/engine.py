"""Engine knobs: KV dtype, backend, prefix caching, mamba cache mode, block size, eager/graphs, batch size,
chunked prefill, weight quantization, model runner."""
from __future__ import annotations

from hypothesis import strategies as st

from hybridfuzz.case import EngineConfig
from hybridfuzz.strategies.platform import Platform


def _none_first(values) -> st.SearchStrategy:
    return st.sampled_from([None, *values])


@st.composite
def engine_configs(draw, platform: Platform) -> EngineConfig:
    dtypes = list(platform.kv_cache_dtypes) if "auto" not in platform.kv_cache_dtypes else ["auto", *[d for d in platform.kv_cache_dtypes if d != "auto"]]
    choices = platform.backend_choices()
    # A dtype no backend choice declares is refused at start-up (narrow() rejects asking for one).
    dtypes = [d for d in dtypes if any(platform.takes(b, d) for b in choices)] or dtypes
    kv = draw(st.sampled_from(dtypes))
    env = {}
    if platform.model_runners:
        runner = draw(st.sampled_from(platform.model_runners))
        if runner:
            env["VLLM_USE_V2_MODEL_RUNNER"] = runner
    eager = draw(st.sampled_from([True, False])) if platform.has_graphs else True
    # Graphs without torch.compile first (seconds per case); compiled graphs only when the operator asks.
    # (eager cases keep the field's default: the YAML then says nothing about a path that did not run).
    compiled = True if eager else (draw(st.sampled_from([False, True])) if platform.compiled_graphs else False)
    # None (vLLM picks) first, then the backends that declare this KV dtype: a backend named with one it does not
    # declare is a start-up refusal (strategies/platform.py Platform.takes).
    takes_kv = [b for b in choices if platform.takes(b, kv)] or list(choices)
    backend = draw(st.sampled_from(takes_kv)) if len(choices) > 1 else choices[0]
    return EngineConfig(
        kv_cache_dtype=kv,
        attention_backend=backend,
        enable_prefix_caching=draw(st.sampled_from([None, True, False])),
        block_size=draw(_none_first(platform.block_sizes)),
        enforce_eager=eager,
        torch_compile=compiled,
        max_num_seqs=draw(st.sampled_from([8, 1, 2, 4, 16])),
        mamba_cache_mode=draw(st.sampled_from([None, "align", "none"])),
        enable_sleep_mode=draw(st.booleans()) if platform.has_sleep_mode else False,
        extra=draw(scheduler_and_weights(platform)),
        env=env,
    )


def tensor_parallel_sizes(platform: Platform) -> st.SearchStrategy[int]:
    """GPUs a case's engine spans, 1 first (shrinks there); 2 only where the platform has two GPUs. Drawn before the
    model (strategies/case.py), whose head counts depend on it; a single choice draws nothing (st.just)."""
    choices = platform.tensor_parallel_choices()
    return st.sampled_from(choices) if len(choices) > 1 else st.just(choices[0])


@st.composite
def scheduler_and_weights(draw, platform: Platform) -> dict:
    """Knobs outside EngineConfig's named fields: a small token budget per step forces chunked
    prefill (prompts split mid-block, GDN state carried between chunks); online weight
    quantization changes the kernels that run before attention. Empty first: shrinks to defaults."""
    extra: dict = {}
    budget = draw(st.sampled_from([None, 64, 128, 200]))
    if budget is not None:
        extra["max_num_batched_tokens"] = budget
        extra["enable_chunked_prefill"] = True
    if platform.weight_quantizations:
        quant = draw(_none_first(platform.weight_quantizations))
        if quant is not None:
            extra["quantization"] = quant
    return extra
