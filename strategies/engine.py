"""Engine knobs: KV dtype, backend, prefix caching, mamba cache mode, block size, eager/graphs, batch size."""
from __future__ import annotations

from hypothesis import strategies as st

from hybridfuzz.case import EngineConfig
from hybridfuzz.strategies.platform import Platform


def _none_first(values) -> st.SearchStrategy:
    return st.sampled_from([None, *values])


@st.composite
def engine_configs(draw, platform: Platform) -> EngineConfig:
    dtypes = list(platform.kv_cache_dtypes) if "auto" not in platform.kv_cache_dtypes else ["auto", *[d for d in platform.kv_cache_dtypes if d != "auto"]]
    kv = draw(st.sampled_from(dtypes))
    env = {}
    if platform.model_runners:
        runner = draw(st.sampled_from(platform.model_runners))
        if runner:
            env["VLLM_USE_V2_MODEL_RUNNER"] = runner
    return EngineConfig(
        kv_cache_dtype=kv,
        attention_backend=draw(_none_first(platform.attention_backends)) if len(platform.attention_backends) > 1 else None,
        enable_prefix_caching=draw(st.sampled_from([None, True, False])),
        block_size=draw(_none_first(platform.block_sizes)),
        enforce_eager=draw(st.sampled_from([True, False])) if platform.has_graphs else True,
        max_num_seqs=draw(st.sampled_from([8, 1, 2, 4, 16])),
        mamba_cache_mode=draw(st.sampled_from([None, "align", "none"])),
        enable_sleep_mode=draw(st.booleans()) if platform.has_sleep_mode else False,
        env=env,
    )
