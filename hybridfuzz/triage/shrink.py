"""Shrink a YAML case directly, without Hypothesis: ``hybridfuzz shrink case.yaml``.

Hypothesis shrinks what the fuzz loop found while the loop runs, and only while its
budget lasts (a GPU campaign's finding may stop at 4 steps). This shrinker starts
from any case file: a finding cut short, a hand-written report, a case from another
machine with no example database. It tries simpler variants of the case, biggest
simplification first, keeps the first one that still fails with the same
signature, and repeats until no variant does (delta debugging, greedy). Variants
run several at a time on the host, so a GPU with many small engines shrinks fast.

Blocks before single items, as in Zeller's ddmin: half the steps (or layers, or
non-default settings) at once, then quarters, down to one. A warm engine's history
runs to hundreds of steps (262 in the 0.33.0 campaign of 2026-12-03), and one at a
time a 300 s budget removed about twenty of them. After a kept variant the search
goes on from where it was instead of from the first variant again: the variants
before it were just tried and failed to reproduce, and trying them again first cost
one engine run per kept step. It ends, as before, when a whole round keeps nothing.

Sleep/wake pairs come after the longer blocks, not before them: a warm history of 306 steps, most of them sleep and
wake-up calls, lost one pair per engine run for 654 s and 16 steps on the H200 (``ef8dca8d``, vLLM 0.33.0, 2026-12-04),
because every kept pair sent the search on to the next pair and the halves were never tried.

Settings back to their defaults come before prompts are cut: a setting can be what holds a prompt long. On the H100
(427e4a18, vLLM 0.33.0, 2026-12-06), with chunked prefill at 64 tokens set, no cut of two prompt copies below 73 tokens was
kept, two tokens a kept variant for 160 s, and the settings came last, at 448 s of 470. The next shrink, once the
long-memory model was at its default too, cut the copies from 49 tokens to 7 in 35 s.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, CaseError, EngineConfig, Generate, Sleep, Submit, WakeUp, case_from_dict, case_to_dict
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import evaluate_sessions, interfered
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.health import device_fault_target, unjudged
from hybridfuzz.oracles.verdict import Verdict

# Batches in a row whose every variant went unjudged (oracles/health.py unjudged) before a shrink stops: the host has
# lost its device or cannot start engines, and every further variant would be "not smaller" for no reason of the case's.
HOST_LOST_BATCHES = 3


def variants_at_once(signature: str, parallel: int) -> int:
    """How many variants a shrink toward ``signature`` runs at once: ``parallel``, but one for a GPU fault
    (oracles/health.py device_fault_target). Twice a host lost its GPU while such shrinks ran beside other engines:
    on the H100 of 2026-12-05, 32 faulting engines among a dozen others, then context-switch timeouts (Xid 109), the
    GPU's system processor silent (Xid 119) and a GPU that needed a reset (results/2026-12-05-h100-vllm0.33.0-shrinks-gpu-fault/); on the
    H200 of 2026-12-04 (vLLM 0.33.0) all engines lost the device the same way. One faulting engine at a time is the least a
    shrink can do; running it with nothing else on the GPU is the caller's part (gpu/README.md)."""
    return 1 if device_fault_target(signature) else parallel


def _without(items: list, i: int, n: int = 1) -> list:
    return items[:i] + items[i + n:]


def variants(case: Case, protocol: sleepwake.Host = sleepwake.OFFLINE) -> Iterator[tuple[str, Case]]:
    """Simpler cases, each with a short description; biggest simplification first.

    Only valid cases: a field set back to its default can break a rule of the schema
    (max_model_len 512 under a longer prompt, vocab_size 512 under token 600, heads that
    no longer divide); such a variant would waste an engine run, or be written out as a
    case file that no longer loads. Nor a variant with a step the sleep/wake contract says
    blocks (dropping the wake-up after ``sleep(level=0)`` leaves a generate waiting on a
    paused scheduler): it would wait out the engine timeout by design (600 s of a 60 s
    shrink budget, 2026-12-01), and the strategies never draw one either."""
    for _, why, c in _from(case, protocol, 0):
        yield why, c


def _from(case: Case, protocol: sleepwake.Host, start: int) -> Iterator[tuple[int, str, Case]]:
    """``variants`` with each one's place among all candidates, beginning at ``start`` and wrapping round. Lazy: a
    262-step history has hundreds of candidates, and checking each against the schema took seconds a round."""
    candidates = list(_candidates(case))
    blocking = _blocking_steps(case, protocol)
    seen: set[str] = set()  # a block can equal a sleep/wake pair or a single drop: one engine run each is enough
    for k in range(len(candidates)):
        at = (start + k) % len(candidates)
        why, c = candidates[at]
        data = case_to_dict(c)
        key = repr(data)
        if key not in seen and _loads(data) and _blocking_steps(c, protocol) <= blocking:
            seen.add(key)
            yield at, why, c


def _blocking_steps(case: Case, protocol: sleepwake.Host) -> int:
    return sum(w.rule.call == "blocks" for w in sleepwake.walk(case.steps, protocol))


def unrunnable(variant: Case, case: Case, protocol: sleepwake.Host = sleepwake.OFFLINE) -> str:
    """Why ``variant`` of ``case`` is no variant to run, in a few words ("" when it is one): the schema rule it breaks
    (its YAML would not load), or a step it leaves waiting on a paused engine that ``case`` did not (``variants``
    says why neither is worth an engine run). ``hybridfuzz isolate`` reports it for a flip it cannot make."""
    try:
        case_from_dict(case_to_dict(variant))
    except CaseError as e:
        return f"the case would not load ({e})"
    if _blocking_steps(variant, protocol) > _blocking_steps(case, protocol):
        return "a later step would wait on a paused engine (hybridfuzz/sleepwake.py)"
    return ""


def step_drops(steps: list) -> Iterator[tuple[int, int]]:
    """(start, length) of each single step to drop, a sleep and the wake-up right after it as one (a sleep without
    its wake-up leaves the engine asleep, and every later step fails for that); never the case's only step."""
    i = 0
    while i < len(steps) and len(steps) > 1:
        n = 2 if isinstance(steps[i], Sleep) and i + 1 < len(steps) and isinstance(steps[i + 1], WakeUp) and len(steps) > 2 else 1
        yield i, n
        i += n


def _valid(case: Case) -> bool:
    return _loads(case_to_dict(case))


def _loads(data: dict) -> bool:
    """Would this case's YAML load (``case_from_dict``'s rules)?"""
    try:
        case_from_dict(data)
    except CaseError:
        return False
    return True


def blocks(n: int) -> Iterator[tuple[int, int]]:
    """(start, length) of the runs of more than one item to drop from ``n`` items, longest first: halves, quarters,
    ... down to pairs; never all ``n`` (a case keeps a step and a layer). Single items come after, one by one."""
    size = n // 2
    while size >= 2:
        for start in range(0, n, size):
            if min(size, n - start) >= 2 and not (start == 0 and size >= n):
                yield start, min(size, n - start)
        size //= 2


def _candidates(case: Case) -> Iterator[tuple[str, Case]]:
    steps = case.steps
    step_blocks = list(blocks(len(steps)))
    for start, n in step_blocks:  # runs longer than a pair first: the biggest simplification first
        if n > 2:
            yield f"drop steps {start}-{start + n - 1}", case.replace(steps=_without(steps, start, n))
    for i in range(len(steps) - 1):  # a sleep and its wake_up go together
        if isinstance(steps[i], Sleep) and isinstance(steps[i + 1], WakeUp) and len(steps) > 2:
            yield f"drop steps {i}-{i + 1} (sleep, wake_up)", case.replace(steps=_without(steps, i, 2))
    for start, n in step_blocks:
        if n <= 2:
            yield f"drop steps {start}-{start + n - 1}", case.replace(steps=_without(steps, start, n))
    if len(steps) > 1:
        for i in range(len(steps)):
            yield f"drop step {i} ({type(steps[i]).__name__})", case.replace(steps=_without(steps, i))
    layers = case.model.layers
    for start, n in blocks(len(layers)):
        yield f"drop layers {start}-{start + n - 1}", case.replace(model=dataclasses.replace(case.model, layers=tuple(_without(list(layers), start, n))))
    if len(layers) > 1:
        for i in range(len(layers)):
            yield f"drop layer {i} ({layers[i]})", case.replace(model=dataclasses.replace(case.model, layers=tuple(_without(list(layers), i))))
    yield from _default_fields(case)
    for i, s in enumerate(steps):
        if isinstance(s, Generate) and len(s.prompts) > 1:
            for j in range(len(s.prompts)):
                yield f"step {i}: drop prompt {j}", _with_step(case, i, dataclasses.replace(s, prompts=_without(s.prompts, j)))
    yield from _prompt_cuts(case)
    for i, s in enumerate(steps):
        if isinstance(s, Generate) and s.max_tokens > 1:
            for m in sorted({1, s.max_tokens // 2} - {s.max_tokens}):
                yield f"step {i}: max_tokens {m}", _with_step(case, i, dataclasses.replace(s, max_tokens=m))


def cut_lengths(n: int) -> list[int]:
    """Lengths to cut an n-token prompt to, the biggest cut first: n/2, 3n/4, 7n/8, ... n-1. Halving alone and then
    one token at a time walked a 245-token prompt down by one token per engine run where the finding needed about
    230 of them (`shrink` of 27b03db4 on the H200, vLLM 0.33.0, 2026-12-04: 12 runs for 12 tokens); these find such a
    threshold in about log2(n) runs."""
    lengths, drop = [], n // 2
    while drop >= 1:
        lengths.append(n - drop)
        drop //= 2
    return sorted(set(lengths) - {0, n})


def _prompt_cuts(case: Case) -> Iterator[tuple[str, Case]]:
    """Prompts cut short from the end: first every copy of a prompt the case sends more than once, together (a
    self-consistency finding compares identical prompts, and cutting one copy alone makes them unequal: the pair
    and its finding vanish), then each prompt alone."""
    generates = [(i, s) for i, s in enumerate(case.steps) if isinstance(s, Generate)]
    copies: dict[tuple[int, ...], int] = {}
    for _, s in generates:
        for p in s.prompts:
            copies[tuple(p)] = copies.get(tuple(p), 0) + 1
    for prompt, count in copies.items():
        if count < 2:
            continue
        for keep in cut_lengths(len(prompt)):
            steps = [dataclasses.replace(s, prompts=[list(p[:keep]) if tuple(p) == prompt else p for p in s.prompts])
                     if isinstance(s, Generate) else s for s in case.steps]
            yield f"{count} copies of a {len(prompt)}-token prompt to {keep} tokens", case.replace(steps=steps)
    for i, s in generates:
        for j, p in enumerate(s.prompts):
            for keep in cut_lengths(len(p)):
                prompts = [q if k != j else p[:keep] for k, q in enumerate(s.prompts)]
                yield f"step {i}: prompt {j} to {keep} tokens", _with_step(case, i, dataclasses.replace(s, prompts=prompts))


def _with_step(case: Case, i: int, step) -> Case:
    return case.replace(steps=[step if k == i else s for k, s in enumerate(case.steps)])


Edit = Callable[[Case], Case]


def _default_edits(case: Case) -> list[tuple[str, Edit]]:
    """Each engine and model setting off its default, with the edit that sets it back (an extra/env key: drops it)."""
    edits: list[tuple[str, Edit]] = []
    default_engine = EngineConfig()
    for f in dataclasses.fields(EngineConfig):
        value = getattr(case.engine, f.name)
        if f.name == "torch_compile" and not case.engine.enforce_eager:
            continue  # vLLM's default here is the compiled graph path: a minute slower, never simpler
        if f.name in ("extra", "env"):
            for key in value:
                edits.append((f"engine.{f.name}: drop {key}", lambda c, name=f.name, key=key: c.replace(
                    engine=dataclasses.replace(c.engine, **{name: {k: v for k, v in getattr(c.engine, name).items() if k != key}}))))
        elif value != getattr(default_engine, f.name):
            edits.append((f"engine.{f.name}: default", lambda c, name=f.name: c.replace(
                engine=dataclasses.replace(c.engine, **{name: getattr(default_engine, name)}))))
    default_model = ModelSpec()
    for f in dataclasses.fields(ModelSpec):
        if f.name != "layers" and getattr(case.model, f.name) != getattr(default_model, f.name):
            edits.append((f"model.{f.name}: default", lambda c, name=f.name: c.replace(
                model=dataclasses.replace(c.model, **{name: getattr(default_model, name)}))))
    for i, step in enumerate(case.steps):  # the new dimensions' request fields (docs/dimensions.md): greedy, no seed, ...
        if not isinstance(step, (Generate, Submit)):
            continue
        defaults = {f.name: f.default for f in dataclasses.fields(step) if f.name in REQUEST_FIELDS}
        for name, default in defaults.items():
            if getattr(step, name) != default:
                edits.append((f"steps[{i}].{name}: default", lambda c, i=i, name=name, default=default: _with_step(
                    c, i, dataclasses.replace(c.steps[i], **{name: default}))))
    return edits


# Request fields of generate/submit that a shrunk case keeps only when its finding needs them.
REQUEST_FIELDS = ("temperature", "seed", "n", "prompt_logprobs", "priority", "advance")


def _default_fields(case: Case) -> Iterator[tuple[str, Case]]:
    """Engine and model settings back to their defaults: several at once (``blocks``), then one at a time."""
    edits = [(why, edit) for why, edit in _default_edits(case) if _valid(edit(case))]  # an invalid one spoils its blocks
    runs = ([(0, len(edits))] if len(edits) >= 2 else []) + list(blocks(len(edits)))  # all of them at once first
    for start, n in runs:
        smaller = case
        for _, edit in edits[start:start + n]:
            smaller = edit(smaller)
        names = ", ".join(why.replace(": drop ", ".").replace(": default", "") for why, _ in edits[start:start + n])
        yield f"{n} settings to default ({names})", smaller
    for why, edit in edits:
        yield why, edit(case)


def describe(case: Case) -> str:
    tokens = sum(len(p) for s in case.steps if isinstance(s, Generate) for p in s.prompts)
    return f"{len(case.model.layers)} layer(s), {len(case.steps)} step(s), {tokens} prompt tokens"


@dataclass
class ShrinkResult:
    case: Case
    # the last kept variant's verdict; None when nothing smaller was kept, and the caller's run of ``case`` is its
    # verdict (a stand-in verdict here went into a case file as an observation without oracle or symptom on the H100, 2026-12-06)
    verdict: Verdict | None
    runs: int  # engine runs, references included
    accepted: list[str]  # the simplifications kept, in order
    seconds: float
    finished: bool  # a full pass found nothing smaller, every variant of it judged (``tries`` runs each)
    stopped: str = ""  # when not finished, why: the budget ended, a variant went unjudged, or the host was lost
    tries: int = 1  # fresh runs a variant got before it counted as not failing


def evaluate_batch(cases: list[Case], host: Host, timeout: float | None, alone: bool = False) -> tuple[list[Verdict], int]:
    """Judge variants as the executor judges any case, each on its own fresh engine, all at once: its reference
    (unless ``alone``) and its controls included (judged without controls, a shrink of an LFM2 finding on
    2026-12-01 kept variants that replayed as PASS). A variant whose run our harness spoiled (executor.interfered) is
    run once more. Returns the verdicts and the engines run."""
    def run(batch: list[Case]) -> list:
        return [r for (r,) in evaluate_sessions([[c] for c in batch], host, timeout, cache=None, alone=alone)]

    results = run(cases)
    again = [i for i, r in enumerate(results) if interfered(r)]  # once more, as executor.replay tries them
    retried = run([cases[i] for i in again]) if again else []
    engines = sum(1 + (r.reference is not None) + len(r.controls) for r in results + retried)
    for i, r in zip(again, retried):
        results[i] = r
    return [r.verdict for r in results], engines


def _first_hit(chunk: list, verdicts: list[Verdict], signature: str):
    """The first variant of the batch (in search order) whose run failed with ``signature``: (at, why, case, verdict)."""
    return next(((i, why, c, v) for (i, why, c), v in zip(chunk, verdicts) if v.signature == signature), None)


def shrink(case: Case, signature: str, host: Host, budget_s: float, parallel: int, timeout: float | None = None,
           on_smaller: Callable[[Case, Verdict, str], None] = lambda c, v, why: None,
           log: Callable[[str], None] = print, alone: bool = False,
           judge: Callable[[list[Case]], tuple[list[Verdict], int]] | None = None, tries: int = 1) -> ShrinkResult:
    """Greedy: take the first variant (in ``variants`` order) that fails with ``signature``; repeat.

    ``tries``: fresh runs a batch of variants gets before none of them counts as failing (reproduce.shrink_tries: from
    the finding's recorded rate). Judged once each, a finding that shows in half its runs drops half the simplifications
    that keep it, and "minimal" says nothing (the H100 shrinks of 2026-12-05: 6e91af78 at 3 of 6 kept 1 simplification in 20 engine runs).

    ``on_smaller`` is called with every smaller failing case at once (write it to disk there),
    so a run killed mid-shrink keeps its progress. ``alone``: the finding is decided by the case's own
    run (oracles/health.py decided_alone), so variants run without their reference engines: a crash's
    shrink then starts half the engines (the H200 campaign of 2026-12-01 ran 2 shrinks of 2 variants,
    8 engines, beside 24 generating ones on 16 cores at a load of 3 per core). ``judge``: verdicts and engine runs
    for a batch of variants, ``evaluate_batch`` on ``host`` unless given (tests of the search order give a rule).
    """
    judge = judge or (lambda cases: evaluate_batch(cases, host, timeout, alone))
    parallel = variants_at_once(signature, parallel)
    t0 = time.monotonic()
    runs, accepted = 0, []
    verdict: Verdict | None = None
    current = case
    protocol = getattr(host, "protocol", sleepwake.OFFLINE)
    at = 0  # the candidate the search goes on from after a kept variant (the module docstring says why)
    lost = 0  # batches in a row whose every variant went unjudged

    def ended(finished: bool, stopped: str = "") -> ShrinkResult:
        return ShrinkResult(current, verdict, runs, accepted, time.monotonic() - t0, finished, stopped, tries)

    while True:
        improved = False
        unsure = False  # a variant of this pass went unjudged: finding nothing smaller proves nothing
        pending = _from(current, protocol, at)
        while chunk := list(itertools.islice(pending, parallel)):
            if time.monotonic() - t0 > budget_s:
                return ended(False, "budget ended")
            verdicts, n = judge([c for _, _, c in chunk])
            runs += n
            spoiled = [unjudged(v) for v in verdicts]
            lost = lost + 1 if all(spoiled) else 0
            if lost >= HOST_LOST_BATCHES:
                log(f"  [{time.monotonic() - t0:6.0f}s] stopped: {lost} batches in a row ran no variant "
                    f"({verdicts[0].summary}); the host, not the case")
                return ended(False, "host lost")
            hit = _first_hit(chunk, verdicts, signature)
            attempt = 1
            while not hit and attempt < tries:  # the same batch again, on fresh engines, until one shows it
                if time.monotonic() - t0 > budget_s:  # its variants did not get their tries: no minimum is proven
                    return ended(False, "budget ended")
                attempt += 1
                verdicts, n = judge([c for _, _, c in chunk])
                runs += n
                spoiled = [was and unjudged(v) for was, v in zip(spoiled, verdicts)]  # unjudged only if never judged
                hit = _first_hit(chunk, verdicts, signature)
            unsure |= any(spoiled)
            if hit:
                at, why, current, verdict = hit
                accepted.append(why)
                log(f"  [{time.monotonic() - t0:6.0f}s] kept: {why} -> {describe(current)}"
                    + (f" (on try {attempt} of {tries})" if attempt > 1 else ""))
                on_smaller(current, verdict, why)
                improved = True
                break
        if not improved:
            return ended(not unsure, "a variant went unjudged" if unsure else "")
