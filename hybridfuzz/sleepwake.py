"""Sleep/wake as a stateful protocol: vLLM's engine states, its transitions, and one table of what
each call must do in each state. The single source of truth for the step strategies (which calls to
generate where), the self-consistency oracle (which outputs are defined and compared) and the
health oracle (which calls may be refused, which must succeed).

The model follows vLLM's documented contract (docs/features/sleep_mode.md, the docstrings of
``LLM.sleep``/``LLM.wake_up`` and ``EngineCore.wake_up``), read against vLLM 0.32.0's source:

- ``sleep(level, mode)`` first pauses the scheduler (mode: ``abort`` the requests in flight,
  ``wait`` for them, or ``keep`` them frozen; a level >= 1 also clears the prefix cache), then
  level 1 offloads the weights to CPU and discards the KV cache, level 2 discards both. Memory
  tags already asleep stay as they are ("sleeping an already sleeping tag is a no-op").
- ``wake_up(tags)``: ``null`` wakes every tag; a list wakes those tags, in any order, one at a
  time or all at once ("waking up a tag that is not sleeping is a no-op"). The scheduler resumes
  once no memory tag is asleep ("resume scheduling only once all executor memory is resident").
- After a level-2 sleep the weights are undefined until ``reload_weights`` (documented sequence:
  ``wake_up([weights])``, ``collective_rpc("reload_weights")``, ``wake_up([kv_cache])``); a
  generate before that has no defined output, and the KV blocks it leaves in the prefix cache
  are undefined until the cache is cleared.
- While the scheduler is paused, requests are queued, not processed: a blocking ``generate``
  cannot return before the wake-up, so only the server host's ``submit`` (in flight) is sent then.

Where vLLM 0.32.0 departs from the contract the model keeps the contract, so the departure shows
up as a finding: ``wake_up([weights, kv_cache])`` after ``wake_up([kv_cache])`` is a no-op as a
whole there (the executor returns on the first tag that is not asleep), the engine stays paused,
and the next generate hangs.

``python -m hybridfuzz.sleepwake`` prints the table as Markdown.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Literal

from hybridfuzz.case import STEP_NAMES, Abort, Generate, ReloadWeights, ResetPrefixCache, Sleep, Step, Submit, WakeUp

MEMORY_TAGS = ("weights", "kv_cache")
TAGS = ("weights", "kv_cache", "scheduling")
Weights = Literal["loaded", "discarded"]  # "loaded": the checkpoint's weights (kept by level 1, or reloaded)
Call = Literal["succeeds", "no-op", "refused", "blocks", "misuse"]
Outputs = Literal["compared", "not compared", "none"]


@dataclass(frozen=True)
class State:
    """What the protocol knows about one engine between two steps."""

    asleep: frozenset[str] = frozenset()  # memory tags still asleep
    paused: bool = False  # scheduler paused (any sleep, until no memory tag is asleep and wake_up is called)
    weights: Weights = "loaded"
    stale_cache: bool = False  # the prefix cache may hold KV computed with undefined weights
    in_flight: int = 0  # submitted requests not yet collected (server host)

    @property
    def awake(self) -> bool:
        return not self.asleep and not self.paused

    def describe(self) -> str:
        if self.awake:
            return "awake" + (", weights discarded" if self.weights == "discarded" else "")
        parts = [f"{t} asleep" for t in MEMORY_TAGS if t in self.asleep] + (["scheduling paused"] if self.paused else [])
        return ", ".join(parts) + (", weights discarded" if self.weights == "discarded" else "")


@dataclass(frozen=True)
class Host:
    """What an engine host can do. ``blocking_generate``: generate waits for its outputs (all hosts);
    ``submit``: requests can be left in flight (server); ``wait_mode``: ``sleep(mode=wait)`` works
    (the in-process engine core of the fork server refuses it: "'wait' pause mode is not supported in
    inproc-engine mode", vLLM 0.32.0)."""

    name: str = "offline"
    submit: bool = False
    wait_mode: bool = False


OFFLINE = Host("offline")
SERVER = Host("server", submit=True, wait_mode=True)


@dataclass(frozen=True)
class Rule:
    """One row of the table: in states where ``when`` holds, step ``step`` must behave as ``call``
    and its outputs are ``outputs``. Rows are matched in order; the first that holds wins."""

    step: str  # a step kind of the case schema
    when: str  # a condition name from CONDITIONS
    call: Call
    outputs: Outputs
    why: str


# Conditions on (state, step, host) the table's rows name. Plain predicates: the table stays data.
CONDITIONS: dict[str, Callable[[State, Step, Host], bool]] = {
    "always": lambda s, st, h: True,
    "wait mode on a host without it": lambda s, st, h: isinstance(st, Sleep) and st.mode == "wait" and not h.wait_mode,
    "level 0": lambda s, st, h: isinstance(st, Sleep) and st.level == 0,
    "weights asleep": lambda s, st, h: "weights" in s.asleep,
    "no memory asleep": lambda s, st, h: not s.asleep,
    "awake": lambda s, st, h: s.awake,
    "changes nothing": lambda s, st, h: _transition(s, st) == s,
    "scheduling paused": lambda s, st, h: s.paused,
    "weights discarded or cache stale": lambda s, st, h: s.weights == "discarded" or s.stale_cache,
    "submit on a host without it": lambda s, st, h: isinstance(st, Submit) and not h.submit,
}

TABLE: tuple[Rule, ...] = (
    Rule("generate", "scheduling paused", "blocks", "not compared",
         "requests are queued, not processed, until the scheduler resumes; a blocking generate cannot return "
         "(LLM.sleep: the caller guarantees no requests during the sleep). Never generated; on the server use submit"),
    Rule("generate", "weights discarded or cache stale", "succeeds", "not compared",
         "level 2 discarded the weights and nothing reloaded them (or the prefix cache holds KV computed then): "
         "the output is undefined"),
    Rule("generate", "always", "succeeds", "compared",
         "level 1 keeps the weights (offloaded and restored) and level 2 + reload_weights restores them: "
         "identical requests must agree"),
    Rule("submit", "submit on a host without it", "refused", "none", "only the server host leaves requests in flight"),
    Rule("submit", "weights discarded or cache stale", "succeeds", "not compared", "as generate: undefined weights"),
    Rule("submit", "always", "succeeds", "compared",
         "queued while paused, run after the full wake-up; a request the next sleep aborts ends early (not compared); "
         "wait drains it before the sleep, keep resumes it after the wake-up. It must end, never hang"),
    Rule("sleep", "wait mode on a host without it", "refused", "none",
         "the in-process engine core refuses mode wait with a clear error"),
    Rule("sleep", "level 0", "succeeds", "none", "pauses scheduling only; memory untouched"),
    Rule("sleep", "weights asleep", "no-op", "none",
         "sleeping an already sleeping tag is a no-op (the scheduler is paused again, the prefix cache cleared)"),
    Rule("sleep", "always", "succeeds", "none",
         "pauses scheduling, clears the prefix cache; level 1 offloads the weights, level 2 discards them; "
         "the KV cache is discarded"),
    Rule("wake_up", "awake", "no-op", "none", "nothing is asleep: a no-op that must succeed"),
    Rule("wake_up", "changes nothing", "no-op", "none",
         "waking a tag that is not asleep is a no-op (e.g. [scheduling] while a memory tag is asleep)"),
    Rule("wake_up", "always", "succeeds", "none",
         "wakes the named tags (null: all); the scheduler resumes once no memory tag is asleep. "
         "Weights woken after level 2 are undefined until reload_weights"),
    Rule("reset_prefix_cache", "always", "succeeds", "none",
         "scheduler-side bookkeeping: succeeds asleep or awake; clears KV computed with undefined weights"),
    Rule("reload_weights", "weights asleep", "misuse", "none",
         "the weights' memory is released: vLLM's sequence wakes the weights first. Never generated"),
    Rule("reload_weights", "always", "succeeds", "none",
         "loads the checkpoint in place: later outputs must match those before any sleep"),
    Rule("abort", "always", "succeeds", "none",
         "aborts submitted requests still running (oracles/abort.py); one that finished stays finished"),
)


def expect(state: State, step: Step, host: Host = OFFLINE) -> Rule:
    """The table's row for this step in this state."""
    kind = STEP_NAMES[type(step)]
    for rule in TABLE:
        if rule.step == kind and CONDITIONS[rule.when](state, step, host):
            return rule
    raise KeyError(f"no rule for {kind}")  # pragma: no cover - every kind ends with "always"


def apply(state: State, step: Step, host: Host = OFFLINE) -> State:
    """The state after the step, per the contract (a refused, blocked or misused call changes nothing)."""
    if expect(state, step, host).call in ("refused", "blocks", "misuse"):
        return state
    return _transition(state, step)


def _transition(state: State, step: Step) -> State:
    """The contract's effect of a call that is carried out."""
    r = dataclasses.replace
    if isinstance(step, (Generate, Submit)):
        stale = state.stale_cache or state.weights == "discarded"
        return r(state, stale_cache=stale, in_flight=state.in_flight + (len(step.prompts) if isinstance(step, Submit) else 0))
    if isinstance(step, ResetPrefixCache):
        return r(state, stale_cache=False)
    if isinstance(step, Abort):
        return r(state, in_flight=max(0, state.in_flight - len(step.requests)))
    if isinstance(step, ReloadWeights):
        return r(state, weights="loaded")
    if isinstance(step, Sleep):
        if step.level == 0:
            return r(state, paused=True)
        weights = state.weights
        if "weights" not in state.asleep and step.level == 2:
            weights = "discarded"
        return r(state, paused=True, asleep=frozenset(MEMORY_TAGS), weights=weights, stale_cache=False)
    if isinstance(step, WakeUp):
        woken = set(MEMORY_TAGS) if step.tags is None else set(step.tags) & set(MEMORY_TAGS)
        asleep = state.asleep - woken
        return r(state, asleep=frozenset(asleep), paused=state.paused and bool(asleep))
    raise TypeError(f"unknown step {step!r}")  # pragma: no cover


@dataclass(frozen=True)
class Walked:
    index: int
    step: Step
    before: State
    rule: Rule


def walk(steps: list[Step], host: Host = OFFLINE) -> list[Walked]:
    """Each step with the state before it and the table's row for it."""
    out, state = [], State()
    for i, step in enumerate(steps):
        out.append(Walked(i, step, state, expect(state, step, host)))
        state = apply(state, step, host)
    return out


def final_state(steps: list[Step], host: Host = OFFLINE) -> State:
    state = State()
    for step in steps:
        state = apply(state, step, host)
    return state


def compared_steps(steps: list[Step], host: Host = OFFLINE) -> set[int]:
    """Indices of the generate/submit steps whose outputs are defined and compared. A submitted request
    may still be running at a later level-2 sleep (mode keep resumes it after the wake-up): its output
    is compared only when no level-2 sleep follows it."""
    out = set()
    for w in walk(steps, host):
        later_l2 = any(isinstance(s, Sleep) and s.level == 2 for s in steps[w.index + 1:])
        if w.rule.outputs == "compared" and not (isinstance(w.step, Submit) and later_l2):
            out.add(w.index)
    return out


def markdown() -> str:
    """The table for README: one row per rule."""
    lines = ["| step | in state | the call | outputs | why |", "|---|---|---|---|---|"]
    for r in TABLE:
        lines.append(f"| `{r.step}` | {r.when} | {r.call} | {r.outputs} | {r.why} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
