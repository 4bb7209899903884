"""The short snippet an issue opens with: the case in at most 40 lines of plain vLLM.

The full reproducer is a couple of thousand lines (the tiny-model builder and hybridfuzz's oracles, copied);
a maintainer first needs the engine arguments, the prompts, the sampling parameters and the
check. The engine arguments come from ``engines.offline.engine_kwargs``, as the script's do;
the tiny model directory is written by the full script (``--build-only --keep``). The check
is the bug's symptom in plain Python (finite logprobs, identical repeats, the reference
engine's tokens); where hybridfuzz allows noise the snippet is stricter and says so.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from hybridfuzz.case import REFERENCE_CHECKS, STEP_NAMES, Case, Generate, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp
from hybridfuzz.export.signature_check import Expected, error_parts

MAX_LINES = 40
MODEL_DIR = "./tiny-model"
WIDTH = 118


def _wrap(head: str, parts: list[str], close: str, indent: str) -> list[str]:
    """``head`` + parts joined by ", " + ``close``, wrapped at WIDTH with continuation lines at ``indent``."""
    lines, cur = [], head
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else close)
        if len(cur) + len(piece.rstrip()) > WIDTH and cur.strip() not in (head.strip(), ""):
            lines.append(cur.rstrip())
            cur = indent
        cur += piece
    return lines + [cur.rstrip()]


def _kwargs(kw: dict[str, Any]) -> list[str]:
    return [f"{k}={v!r}" for k, v in kw.items()]


def _changed(step) -> dict[str, Any]:
    """A step's fields that differ from their defaults (the prompts aside)."""
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step)
            if f.name != "prompts" and f.default is not dataclasses.MISSING and getattr(step, f.name) != f.default}


def _step_lines(step, index: int) -> list[str]:
    if isinstance(step, Generate):
        extra = {k: v for k, v in _changed(step).items() if k not in ("max_tokens", "logprobs")}
        args = [f"max_tokens={step.max_tokens}", f"logprobs={step.logprobs}", *_kwargs(extra)]
        return [f"generate({[list(p) for p in step.prompts]!r}, {', '.join(args)})"]
    if isinstance(step, Sleep):
        return [f"llm.sleep(level={step.level}" + (f", mode={step.mode!r})" if step.mode != "abort" else ")")]
    if isinstance(step, WakeUp):
        return [f"llm.wake_up(tags={list(step.tags)!r})" if step.tags is not None else "llm.wake_up()"]
    if isinstance(step, ResetPrefixCache):
        return ["llm.reset_prefix_cache()"]
    if isinstance(step, ReloadWeights):
        return ['llm.collective_rpc("reload_weights")']
    if isinstance(step, Submit):
        return [f"# step {index}: {len(step.prompts)} request(s) left in flight (the full script has them)"]
    return [f"# step {index}: {STEP_NAMES.get(type(step), type(step).__name__)} {_changed(step)} (the full script has it)"]


def _check(case: Case, expected: Expected | None, reference: dict[str, Any]) -> list[str]:
    """The lines after the run that fail when the bug shows (its symptom in plain Python). ``reference``: how the
    reference engine's arguments differ from the case's (the oracles that compare with a reference run)."""
    oracle = expected.oracle if expected else "health"
    symptom = expected.symptom if expected else "nonfinite"
    if oracle == "health" and symptom == "nonfinite":
        return ["logprobs = [lp.logprob for _, o in results for pos in o.outputs[0].logprobs or [] for lp in pos.values()]",
                'assert all(math.isfinite(x) for x in logprobs), "non-finite logprobs: " + str([o.outputs[0].token_ids for _, o in results])']
    if oracle == "health" and symptom == "out-of-vocab":
        return ["tokens = [t for _, o in results for t in o.outputs[0].token_ids]",
                f'assert all(0 <= t < {case.model.vocab_size} for t in tokens), f"token id outside the vocabulary: {{tokens}}"']
    if oracle == "health":
        return ['print("finished without the error: not reproduced")']
    if oracle in REFERENCE_CHECKS:
        ref = ", ".join(_kwargs(reference))
        why = "hybridfuzz allows a flip between near-tied tokens; this compares exactly" if oracle == "reference" else f"the {oracle} check"
        if oracle == "abort":
            why += " (its reference aborts nothing: drop the abort steps there)"
        return [f"reference = run_case({ref})  # {why}",
                "for (key, o), (_, r) in zip(results, reference):",
                '    assert o.outputs[0].token_ids == r.outputs[0].token_ids, f"{key}: {o.outputs[0].token_ids} vs reference {r.outputs[0].token_ids}"']
    if oracle == "prefix_cache":
        return ["seen = set()", "for key, o in results:  # a repeated prompt should be served from the prefix cache",
                '    assert key not in seen or o.num_cached_tokens, f"no prefix-cache hit on a repeat of {key}"', "    seen.add(key)"]
    return ["first = {}", "for key, o in results:  # identical greedy requests in one engine",
            "    tokens = list(o.outputs[0].token_ids)",
            '    assert first.setdefault(key, tokens) == tokens, f"identical greedy requests differ: {first[key]} then {tokens}"']


def engine_snippet(case: Case, engine_kwargs: dict[str, Any], env: dict[str, str], expected: Expected | None, script_name: str,
                   failure: tuple[str, int | None] = ("", -1), reference: dict[str, Any] | None = None) -> str:
    """The case as plain vLLM. ``engine_kwargs``: vllm.LLM's arguments less the model; ``failure``: a comment naming
    what raises, crashes or hangs, and the step it does so at (None: start-up; -1: no such comment); ``reference``:
    the reference run's arguments where they differ."""
    note, at = failure
    check = _check(case, expected, reference or {})
    head = [f"# {MODEL_DIR}: the tiny random model, written by the full script below: python {script_name} --build-only --keep {MODEL_DIR}",
            *(["import math"] if any("math." in c for c in check) else []), *(["import os"] if env else []), "", "import vllm",
            "from vllm import SamplingParams", "from vllm.inputs import TokensPrompt", ""]
    head += _wrap("os.environ.update({", [f"{k!r}: {v!r}" for k, v in env.items()], "})", "    ") if env else []
    head += _wrap("ENGINE = dict(", _kwargs({"model": MODEL_DIR, **engine_kwargs}), ")", "              ")
    body = ["", "", "def run_case(**override):"]
    if note and at is None:
        body.append(f"    # {note}")
    body += ["    llm = vllm.LLM(**{k: v for k, v in {**ENGINE, **override}.items() if v is not None})  # None: vLLM's default",
             "    results = []  # ((prompt, max_tokens), RequestOutput) per request", "",
             "    def generate(prompts, max_tokens, logprobs, priority=0, **sampling):  # greedy unless sampling says otherwise",
             "        params = SamplingParams(**{'temperature': 0.0, **sampling}, ignore_eos=True, max_tokens=max_tokens, logprobs=logprobs)",
             "        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False,",
             "                            priority=[priority] * len(prompts) if priority else None)",
             "        results.extend(((tuple(p), max_tokens), o) for p, o in zip(prompts, outs))", ""]
    steps = [(i, line) for i, step in enumerate(case.steps) for line in _step_lines(step, i)]
    fixed = len(head) + len(body) + len(check) + 5 + (1 if note and at is not None and at >= 0 else 0)
    for group in _pack(steps, MAX_LINES - fixed):
        if note and at is not None and at in [i for i, _ in group]:
            body.append(f"    # {note}")
        body.append("    " + "; ".join(line for _, line in group))
    body += ["    return results", "", "", "results = run_case()", *check]
    return "\n".join(head + body) + "\n"


def _pack(steps: list[tuple[int, str]], room: int) -> list[list[tuple[int, str]]]:
    """One step a line where they fit in ``room`` lines; else consecutive steps joined by "; " up to WIDTH (after a
    comment nothing joins: it would swallow what follows), and where that is still too many, wider lines."""
    if len(steps) <= room:
        return [[s] for s in steps]
    groups: list[list[tuple[int, str]]] = []
    for s in steps:
        last = groups[-1] if groups else None
        joined = "    " + "; ".join(line for _, line in (last or []) + [s])
        if last and not s[1].startswith("#") and not last[-1][1].startswith("#") and len(joined) <= WIDTH:
            last.append(s)
        else:
            groups.append([s])
    if len(groups) > room > 0:  # still too many: as many steps a line as it takes, however wide
        per = -(-len(steps) // room)
        groups = []
        for s in steps:
            if groups and len(groups[-1]) < per and not s[1].startswith("#") and not groups[-1][-1][1].startswith("#"):
                groups[-1].append(s)
            else:
                groups.append([s])
    return groups


def failure_of(expected: Expected | None, summary: str, vllm: str, device: str) -> tuple[str, int | None]:
    """The comment for a bug that raises, crashes or hangs, and where (None: start-up; -1: not such a bug)."""
    if expected is None:
        return "", -1
    outcome = expected.symptom.partition(":")[0]
    parts = error_parts(summary)
    if outcome not in ("error", "crash", "timeout") or parts is None:
        return "", -1
    m = re.search(r" at step (\d+) \(", summary)
    at = int(m.group(1)) if m else None
    _, etype, message = parts
    what = {"error": f"raises {etype}: {message}", "crash": f"the engine process dies here ({etype})",
            "timeout": "hangs here"}[outcome]
    return f"vLLM {vllm} on {device}: {what}"[:200], at


def fits(snippet: str) -> bool:
    return len(snippet.splitlines()) <= MAX_LINES
