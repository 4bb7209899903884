"""The issue body: Markdown in the shape of vLLM's bug-report template, one per bug.

A maintainer reads the title (the ledger's, in vLLM's words), the environment of the
machine where the reproducer last ran standalone (never the exporting machine's: a GPU
bug exported on a laptop once carried the laptop's collect_env), the short snippet
(``snippet.py``), the full script collapsed below it (``script.py``), and a versions line
that states only what ran: where hybridfuzz saw it, where the reproducer ran, and a first
bad/last good only where the ledger records a bisect.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import yaml

from hybridfuzz import model as model_mod
from hybridfuzz.case import Case, Generate, Observation, device_kind, dump_case
from hybridfuzz.export.bug import Report, case_report, latest_run, on, run_kind
from hybridfuzz.export.script import SCRIPT_ENV, expected_for, latest_divergence, standalone_script
from hybridfuzz.export.signature_check import EXIT_TEXT, error_parts
from hybridfuzz.export.snippet import engine_snippet, failure_of
from hybridfuzz.triage.ledger import ReproducerRun
from hybridfuzz.triage.reproduce import rate_text

EXPECTED = {
    "health": "every step runs without an exception, crash or hang, and every logprob is finite",
    "self_consistency": "identical greedy requests in one engine give identical tokens (whatever ran in between: "
                        "prefix-cache hits, sleep/wake, resets)",
    "reference": "greedy output stays within quantisation noise of the same engine with {ref} (a token flip only "
                 "where both sides rank the two tokens within {margin} nats, or where {overlap:.0%} of the two top-k sets "
                 "agree; shared top-k logprobs within {drift} nats)",
}
RUN_VERDICT = {1: "reproduces it", 0: "did NOT reproduce it", 3: "did not run (see its line)"}
NOT_RUN = ("The reproducer has not been run standalone yet; `python -m vllm.collect_env` output to be added by the reporter.")


def describe_config(case: Case) -> str:
    e = case.engine
    parts = [f"kv_cache_dtype={e.kv_cache_dtype}"]
    if e.enable_prefix_caching is not None:
        parts.append(f"prefix caching {'on' if e.enable_prefix_caching else 'off'}")
    for name in ("mamba_cache_mode", "block_size", "attention_backend"):
        if getattr(e, name) is not None:
            parts.append(f"{name}={getattr(e, name)}")
    if e.enable_sleep_mode:
        parts.append("sleep mode")
    if e.tensor_parallel_size > 1:
        parts.append(f"tensor_parallel_size={e.tensor_parallel_size} ({e.tensor_parallel_size} GPUs)")
    parts += [f"{k}={v}" for k, v in e.extra.items()]
    return ", ".join(parts)


def model_class(case: Case) -> str:
    """vLLM's model class of the case's family (config.json "architectures")."""
    family = model_mod.FAMILIES.get(case.model.architecture)
    return family.architecture if family is not None else case.model.architecture


def model_phrase(case: Case) -> str:
    """The model as a triager reads it: vLLM's model class and the layer pattern."""
    return f"{model_class(case)} ({model_mod.layer_pattern(case.model.layers)})"


def _component_module(case: Case):
    from hybridfuzz.components import PROPERTIES

    prop = case.component.get("property")
    return importlib.import_module(PROPERTIES[prop]) if prop in PROPERTIES else None


def _short(text: str, n: int = 110) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def symptom_words(obs: Observation) -> str:
    """A divergence as a maintainer names it, not in the harness's words ("case error at ...")."""
    outcome = obs.signature.removeprefix(obs.oracle + ":").split(":")[0] if obs.signature else ""
    parts = error_parts(obs.summary)
    if obs.oracle == "health" and parts is not None:
        place, etype, message = parts
        where = "at start-up" if place == "start-up" else f"in {place}"
        if outcome == "crash":
            return f"the engine process dies ({etype}) {where}"
        if outcome == "timeout":
            return f"hangs {where}"
        return f"{etype} {where}: {message}"
    if obs.oracle == "health" and outcome == "nonfinite":
        return "NaN/inf logprobs in greedy decoding"
    if obs.oracle == "health" and outcome == "out-of-vocab":
        return "samples a token id outside the vocabulary"
    if obs.oracle == "self_consistency":
        return f"identical greedy requests give different tokens ({outcome.replace('-', ' ')})"
    if obs.oracle == "reference":
        return "greedy output differs from the same engine with the auto KV cache beyond quantisation noise"
    if obs.oracle == "prefix_cache":
        return "a repeated prompt never hits the prefix cache"
    return obs.summary


def issue_title(case: Case) -> str:
    """The title of a single case outside the ledger: the model class, the settings, the symptom."""
    obs = latest_divergence(case)
    if case.kind == "component":
        mod = _component_module(case)
        what = getattr(mod, "METHOD", None) or f"component property {case.component.get('property')}"
        return f"[Bug]: {what}: " + (_short(obs.summary.removeprefix(what).lstrip(": ")) if obs else "property fails")
    where = f"{model_phrase(case)} with {describe_config(case)}"
    if obs is None:
        return f"[Bug]: {where}: {'/'.join(case.oracle.checks)} check fails"
    return f"[Bug]: {where}: {_short(symptom_words(obs))}"


def collect_env_text(timeout: float = 120.0) -> str:
    """vLLM's own environment collector (``python -m vllm.collect_env``), or why it could not run."""
    try:
        out = subprocess.run([sys.executable, "-m", "vllm.collect_env"], capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    except (OSError, subprocess.SubprocessError) as e:
        return f"(vllm.collect_env could not run: {type(e).__name__}: {e})"
    text = out.stdout.strip()
    if out.returncode != 0 or not text:
        return f"(vllm.collect_env failed with exit code {out.returncode}: {out.stderr.strip()[-500:]})"
    return text


def _expected(case: Case) -> list[str]:
    from hybridfuzz.oracles.compare import reference_tolerance

    if case.kind == "component":
        mod = _component_module(case)
        first = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ") if mod else ""
        return [f"- **{case.component.get('property')}**: {first}"]
    out = []
    for c in case.oracle.checks:
        text = EXPECTED.get(c) or _oracle_doc(c)
        if c == "reference":
            ref = ", ".join(f"{k}={v}" for k, v in case.oracle.reference.items())
            tol = reference_tolerance(case.engine.kv_cache_dtype)
            text = text.format(ref=ref, margin=tol.flip_margin, drift=tol.drift, overlap=tol.min_topk_overlap)
        out.append(f"- **{c}**: {text}")
    return out


def _oracle_doc(check: str) -> str:
    """What a check expects, in its oracle module's own first sentence (the checks added with their own modules)."""
    try:
        doc = importlib.import_module(f"hybridfuzz.oracles.{check}").__doc__ or ""
    except ImportError:
        doc = ""
    return doc.strip().split("\n\n")[0].replace("\n", " ") or f"the {check} check passes"


def default_script_name(case_name: str) -> str:
    return "repro_" + os.path.splitext(os.path.basename(case_name))[0].replace("-", "_") + ".py"


def _describe_bug(case: Case) -> list[str]:
    if case.kind == "component":
        mod = _component_module(case)
        doc = (mod.__doc__ or "").strip() if mod else ""
        layout = yaml.safe_dump({k: v for k, v in case.component.items() if k != "property"}, sort_keys=False, width=100).rstrip()
        return ([f"An engine-free check of vLLM's own KV-cache code (no model, no engine): property "
                 f"`{case.component.get('property')}`.", ""] + ([doc, ""] if doc else [])
                + ["The input it failed on:", "", "```yaml", layout, "```", ""])
    steps = ", ".join(type(s).__name__ if not isinstance(s, Generate) else "generate" for s in case.steps)
    return [f"A tiny randomly initialised `{model_class(case)}` model (layers: {', '.join(case.model.layers)}; hidden size "
            f"{case.model.hidden_size}, {case.model.dtype}) on `vllm.LLM` with {describe_config(case)} "
            f"(enforce_eager={case.engine.enforce_eager}, max_num_seqs={case.engine.max_num_seqs}), steps: {steps}.", ""]


def _where(obs: Observation) -> str:
    return ", ".join(x for x in (obs.device, obs.isa, f"torch {obs.torch}" if obs.torch else "", obs.date) if x)


def _observed(obs: Observation) -> list[str]:
    short = [e for e in obs.evidence if not e.startswith("log tail")]
    logs = [e for e in obs.evidence if e.startswith("log tail")]
    where = _where(obs)
    runs = f"; {rate_text(obs)}" if obs.runs > 1 else ""
    lines = [f"On vLLM {obs.vllm} ({where}{runs}), the `{obs.oracle}` check failed:", "", "```text", obs.summary,
             *(e[:600] for e in short), "```", ""]
    for e in logs:
        lines += ["<details>", "<summary>engine log tail</summary>", "", "```text", e.replace("\r", "").strip(), "```", "", "</details>", ""]
    if obs.signature:
        lines += [f"Signature: `{obs.signature}`", ""]
    return lines


def _seen_device(obs: Observation) -> str:
    return f"CPU {obs.isa}".strip() if obs.device in ("", "cpu") else obs.device


def _run_text(run: ReproducerRun) -> str:
    return f"{run.device}, vLLM {run.vllm} ({run.date}): exit {run.exit_code}, `{run.line}`"


def _environment(report: Report, run: ReproducerRun | None, exporter: str) -> list[str]:
    """The environment of the machine where the reproducer last ran standalone; never the exporter's own."""
    lines = ["### Your current environment", ""]
    if report.observation is not None:
        lines += [f"- Observed on: vLLM {report.observation.vllm} ({_where(report.observation)}), by hybridfuzz"]
    if run is None:
        return lines + [f"- {NOT_RUN}", ""]
    lines += [f"- The reproducer below last ran standalone on {_run_text(run)}; its environment:"]
    if exporter and exporter != run.device:
        lines += [f"- This report was exported on another machine ({exporter}); the environment below is the run's."]
    lines += ["", "<details>", "<summary>The output of <code>python -m vllm.collect_env</code></summary>", "", "```text",
              run.collect_env.strip() or "(collect_env was not recorded with that run)", "```", "", "</details>", ""]
    return lines


def versions_lines(report: Report) -> list[str]:
    """What ran, and only that: where hybridfuzz saw the bug, where the reproducer ran standalone, and a first bad /
    last good only where the ledger records a bisect."""
    first: dict[tuple[str, str], str] = {}
    for o in report.seen:
        first.setdefault((_seen_device(o), o.vllm), o.date)
    lines = ["**Versions**", ""]
    lines += ["- Seen on: " + ("; ".join(f"{dev}, vLLM {v}" + (f" ({d})" if d else "") for (dev, v), d in first.items())
                               or "no recorded observation")]
    runs = [r for r in report.runs if on(run_kind(r), report.device)]
    lines += ["- Reproducer run standalone: " + ("; ".join(_run_text(r) for r in runs) or "not yet")]
    bisect = report.bug.bisect if report.bug else {}
    if bisect:
        lines += [f"- Bisected: {bisect_text(bisect)}"]
    return lines + [""]


def bisect_text(bisect: dict[str, str]) -> str:
    """The ledger's bisect result (a regression's first bad and last good, or a fix's last bad and first good)."""
    if "first_bad" in bisect:
        text = f"last good {bisect.get('last_good', '?')}, first bad {bisect['first_bad']}"
    else:
        text = f"fixed: last bad {bisect.get('last_bad', '?')}, first good {bisect.get('first_good', '?')}"
    return text + (f" ({bisect['by']})" if bisect.get("by") else "")


def _ledger_lines(report: Report) -> list[str]:
    bug = report.bug
    if bug is None:
        return []
    cause = ", ".join(f"`{k}: {v}`" for k, v in bug.cause.items()) or "not isolated"
    lines = [f"**Cause set** (every setting needed; {report.members} hybridfuzz case{'s' if report.members != 1 else ''} show it): {cause}", "",
             f"**Status**: {bug.status}" + (f"; upstream: {bug.upstream}" if bug.upstream else "") + (f". {bug.reason}" if bug.reason else ""), ""]
    if bug.detail:
        lines += [f"**What was tried**: {bug.detail}", ""]
    return lines


def _snippet(report: Report, script_name: str) -> list[str]:
    """The case in plain vLLM, first: the lines that matter, before the full script."""
    from hybridfuzz.engines import offline

    case = report.case
    if case.kind == "component":
        return []
    obs = report.observation
    kind = report.device if report.device != "any" else (device_kind(obs.device) if obs else "cpu")
    device = "cuda" if kind == "gpu" else "cpu"
    kw = offline.engine_kwargs(case.engine, model_dir="", device=device)
    ref = offline.engine_kwargs(case.reference_case().engine, model_dir="", device=device)
    del kw["model"], ref["model"]
    override = {k: ref.get(k) for k in [*kw, *(k for k in ref if k not in kw)] if ref.get(k) != kw.get(k)}
    failure = failure_of(expected_for(obs), obs.summary, obs.vllm, _seen_device(obs)) if obs else ("", -1)
    text = engine_snippet(case, kw, {**SCRIPT_ENV, **case.engine.env}, expected_for(obs), script_name, failure, override)
    return ["The case in plain vLLM (the full script below builds the model and judges the run as hybridfuzz does):", "",
            "```python", text.rstrip(), "```", ""]


SCRIPT_SUMMARY = "<details>\n<summary>The full reproducer: "  # where the collapsed script begins


def snippet_of(body: str) -> str:
    """The short snippet of an issue body ("" when it has none)."""
    head = body.split(SCRIPT_SUMMARY, 1)[0]
    return head.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n" if "```python\n" in head else ""


def script_of(body: str) -> str:
    """The full script of an issue body."""
    return body.split(SCRIPT_SUMMARY, 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]


def issue_markdown(subject: Report | Case, case_name: str = "case.yaml", *, run: ReproducerRun | None = None,
                   script_output: str | None = None, script_name: str | None = None, script: str | None = None,
                   exporter: str = "") -> str:
    """The body. ``run``: the standalone run whose environment it shows (default: the report's newest on its kind of
    device); ``script_output``: that run's output, when it ran just now; ``exporter``: this machine, named when it is
    not the run's."""
    report = subject if isinstance(subject, Report) else case_report(subject, case_name, issue_title(subject).removeprefix("[Bug]: "))
    case, obs = report.case, report.observation
    script_name = script_name or default_script_name(report.name)
    script = script or standalone_script(case, title=report.title, case_name=report.case_name, script_name=script_name, observation=obs)
    run = run or latest_run(report)
    lines = [f"# [Bug]: {report.title}", ""] + _environment(report, run, exporter)
    lines += ["### 🐛 Describe the bug", ""] + _describe_bug(case) + _snippet(report, script_name)
    needs = "vLLM and torch only" if case.kind == "component" else "vLLM only; it writes the tiny model itself"
    lines += [f"**Reproducer** (needs {needs}; {EXIT_TEXT}):", "",
              SCRIPT_SUMMARY + f"{script_name}</summary>", "", "```python", script.rstrip(), "```", "", "</details>", ""]
    if case.note and report.bug is None:  # a bug's words are the ledger's (reason, detail), not its case's working notes
        lines += [f"Case note: {case.note}", ""]
    lines += ["**Expected**", ""] + _expected(case) + [""]
    lines += ["**Observed**", ""]
    if obs is not None:
        lines += _observed(obs)
    if run is not None and script_output is not None:
        verdict = RUN_VERDICT.get(run.exit_code, f"exited {run.exit_code}")
        lines += [f"Output of the script on {run.device} (exit code {run.exit_code}: {verdict}):", "", "```text", script_output.rstrip(), "```", ""]
    if obs is None and script_output is None:
        lines += ["(no observation recorded in the case; run the script above)", ""]
    lines += versions_lines(report) + _ledger_lines(report)
    status = [f"- vLLM {v}: expected {s}" for v, s in case.expect.items()]
    status += [f"- vLLM {o.vllm} ({o.device}): observed {o.verdict}" + (f" ({o.signature})" if o.signature else "") for o in case.observed]
    lines += ["<details>", f"<summary>The hybridfuzz case ({os.path.basename(report.case_name)}) and what its file records</summary>", ""]
    lines += (["Recorded per vLLM version (hybridfuzz's replays):", "", *status, ""] if status else [])
    lines += ["```yaml", dump_case(case).rstrip(), "```", "", "</details>", ""]
    lines += ["### Before submitting a new issue...", "",
              "- [ ] Make sure you already searched for relevant issues, and asked the chatbot living at the bottom right "
              "corner of the [documentation page](https://docs.vllm.ai/en/latest/), which can answer lots of frequently asked questions.", ""]
    return "\n".join(lines)


def run_script(path: str, timeout: float = 900.0, env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[int, str]:
    """Run an exported script in a fresh interpreter: (exit code, its stdout)."""
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return out.returncode, out.stdout
