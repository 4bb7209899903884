"""The issue body: Markdown in the shape of vLLM's bug-report template, around the standalone script.

Title states the symptom; then the environment (``vllm.collect_env`` plus GPU, driver,
torch, CUDA), what was expected and observed, the script (``script.py``), the
status per vLLM version and the YAML case. Engine and component cases differ only
in how the bug is described and what "expected" means.
"""
from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys

import yaml

from hybridfuzz import model as model_mod
from hybridfuzz.case import Case, Generate, Observation, dump_case
from hybridfuzz.export.script import standalone_script
from hybridfuzz.triage.reproduce import rate_text

EXPECTED = {
    "health": "every step runs without an exception, crash or hang, and every logprob is finite",
    "self_consistency": "identical greedy requests in one engine give identical tokens (whatever ran in between: "
                        "prefix-cache hits, sleep/wake, resets)",
    "reference": "greedy output stays within quantisation noise of the same engine with {ref} (a token flip only "
                 "where both sides rank the two tokens within {margin} nats, or where {overlap:.0%} of the two top-k sets "
                 "agree; shared top-k logprobs within {drift} nats)",
}
RUN_VERDICT = {1: "reproduces it", 0: "did NOT reproduce it", 2: "could not tell (this vLLM refuses the configuration or lacks the code path)"}


def latest_divergence(case: Case) -> Observation | None:
    bad = [o for o in case.observed if o.verdict == "divergence"]
    return bad[-1] if bad else None


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


def issue_title(case: Case) -> str:
    obs = latest_divergence(case)
    if case.kind == "component":
        mod = _component_module(case)
        what = getattr(mod, "METHOD", None) or f"component property {case.component.get('property')}"
        return f"[Bug]: {what}: " + (_short(obs.summary.removeprefix(what).lstrip(": ")) if obs else "property fails")
    where = f"{model_phrase(case)} with {describe_config(case)}"
    if obs is None:
        return f"[Bug]: {where}: {'/'.join(case.oracle.checks)} check fails"
    return f"[Bug]: {where}: {_short(obs.summary)}"


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


def environment_summary() -> dict[str, str]:
    """GPU, driver, torch, CUDA: the four lines a triager looks for first."""
    from hybridfuzz.vllm_facts import vllm_version

    env = {"vLLM": vllm_version(), "Python": platform.python_version(), "OS": platform.platform()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["CUDA"] = str(torch.version.cuda) if torch.version.cuda else "none (CPU build)"
        if torch.cuda.is_available():
            env["GPU"] = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        else:
            env["GPU"] = f"none (CPU: {platform.processor() or platform.machine()})"
    except ImportError as e:
        env["torch"] = f"unavailable ({type(e).__name__})"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        env["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "n/a"
    except (OSError, subprocess.SubprocessError):
        env["driver"] = "n/a (no nvidia-smi)"
    return env


def _expected(case: Case) -> list[str]:
    from hybridfuzz.oracles.compare import reference_tolerance

    if case.kind == "component":
        mod = _component_module(case)
        first = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ") if mod else ""
        return [f"- **{case.component.get('property')}**: {first}"]
    out = []
    for c in case.oracle.checks:
        text = EXPECTED[c]
        if c == "reference":
            ref = ", ".join(f"{k}={v}" for k, v in case.oracle.reference.items())
            tol = reference_tolerance(case.engine.kv_cache_dtype)
            text = text.format(ref=ref, margin=tol.flip_margin, drift=tol.drift, overlap=tol.min_topk_overlap)
        out.append(f"- **{c}**: {text}")
    return out


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


def _observed(obs: Observation) -> list[str]:
    short = [e for e in obs.evidence if not e.startswith("log tail")]
    logs = [e for e in obs.evidence if e.startswith("log tail")]
    where = ", ".join(x for x in (obs.device, obs.isa, f"torch {obs.torch}" if obs.torch else "", obs.date) if x)
    runs = f"; {rate_text(obs)}" if obs.runs > 1 else ""
    lines = [f"On vLLM {obs.vllm} ({where}{runs}), the `{obs.oracle}` check failed:", "", "```text", obs.summary,
             *(e[:600] for e in short), "```", ""]
    for e in logs:
        lines += ["<details>", "<summary>engine log tail</summary>", "", "```text", e.replace("\r", "").strip(), "```", "", "</details>", ""]
    if obs.signature:
        lines += [f"Signature: `{obs.signature}`", ""]
    return lines


def issue_markdown(case: Case, case_name: str = "case.yaml", env_text: str | None = None, env: dict[str, str] | None = None,
                   script_output: str | None = None, script_rc: int | None = None, script_name: str | None = None) -> str:
    title = issue_title(case)
    script_name = script_name or default_script_name(case_name)
    script = standalone_script(case, title=title.removeprefix("[Bug]: "), case_name=case_name, script_name=script_name)
    env = env if env is not None else environment_summary()
    obs = latest_divergence(case)
    lines = [f"# {title}", "", "### Your current environment", ""]
    if obs is not None:  # the machine that saw it first: export often runs elsewhere (a GPU finding exported on a laptop)
        seen = ", ".join(x for x in (obs.device, obs.isa, f"torch {obs.torch}" if obs.torch else "", obs.date) if x)
        lines += [f"- Observed on: vLLM {obs.vllm} ({seen})", "- This report was written on (collect_env below is from here):"]
        lines += [f"  - {k}: {v}" for k, v in env.items()]
    else:
        lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "<details>", "<summary>The output of <code>python -m vllm.collect_env</code></summary>", "", "```text",
              (env_text if env_text is not None else "(not collected: run `python -m vllm.collect_env`)"), "```", "", "</details>", ""]
    lines += ["### 🐛 Describe the bug", ""] + _describe_bug(case)
    if case.note:
        lines += [f"Case note: {case.note}", ""]
    lines += ["**Expected**", ""] + _expected(case) + [""]
    lines += ["**Observed**", ""]
    if obs is not None:
        lines += _observed(obs)
    if script_output is not None:
        verdict = RUN_VERDICT.get(script_rc, f"exited {script_rc}")  # type: ignore[arg-type]
        lines += [f"Output of the script below on this machine (exit code {script_rc}: {verdict}):", "", "```text", script_output.rstrip(), "```", ""]
    if obs is None and script_output is None:
        lines += ["(no observation recorded in the case; run the script below)", ""]
    needs = "vLLM and torch only" if case.kind == "component" else "vLLM only; it writes the tiny model itself"
    lines += [f"**Reproducer** (needs {needs}; exit 1 = reproduced, 0 = fixed, 2 = cannot tell):", "",
              "<details>", f"<summary>{script_name}</summary>", "", "```python", script.rstrip(), "```", "", "</details>", ""]
    from hybridfuzz.triage.bisection import regression_text

    since = regression_text(case, case_name)  # "Regressed in X, still in Y" and the bisect command that showed it
    if since:
        lines += [f"**Versions**: {since}", ""]
    status = [f"- vLLM {v}: expected {s}" for v, s in case.expect.items()]
    status += [f"- vLLM {o.vllm} ({o.device}): observed {o.verdict}" + (f" ({o.signature})" if o.signature else "") for o in case.observed]
    if status:
        lines += ["**Status per vLLM version**", "", *status, ""]
    lines += ["<details>", f"<summary>The hybridfuzz case ({os.path.basename(case_name)})</summary>", "", "```yaml", dump_case(case).rstrip(),
              "```", "", "</details>", ""]
    lines += ["### Before submitting a new issue...", "",
              "- [ ] Make sure you already searched for relevant issues, and asked the chatbot living at the bottom right "
              "corner of the [documentation page](https://docs.vllm.ai/en/latest/), which can answer lots of frequently asked questions.", ""]
    return "\n".join(lines)


def run_script(path: str, timeout: float = 900.0, env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[int, str]:
    """Run an exported script in a fresh interpreter: (exit code, its stdout)."""
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return out.returncode, out.stdout
