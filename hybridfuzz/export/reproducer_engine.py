#!/usr/bin/env python3
"""Reproducer of a hybridfuzz engine case, with vLLM alone.

It writes the case's tiny, randomly initialised model to a temporary directory, runs the
steps on ``vllm.LLM`` in a fresh process (a crash or hang is an observation too), judges
the run as hybridfuzz does, and compares the verdict with the bug's recorded signature
(EXPECTED): exit 1 = reproduced (a divergence with the bug's oracle and symptom, and for
an exception its type, place and message), 0 = not reproduced (the run passed), 3 = did
not run (vLLM or torch missing, a start-up error that is not the bug's, a refusal, another
symptom).

    python repro.py                          # run it
    python repro.py --keep DIR               # also keep the model directory
    python repro.py --build-only --keep DIR  # only write the model (for the short snippet of the issue)

This file is the template of ``hybridfuzz export``, a real module that tests import as it
is. In the exported script the ``hybridfuzz-data`` block holds the case, and the
``hybridfuzz-inline`` block at the end is replaced by the source of the hybridfuzz code it
imports (the tiny-model builder, the Trace records, the refusal rule, ``executor.judge``
with its oracles, the torchvision guard and ``signature_check.decide``), verbatim.
"""
from __future__ import annotations

import dataclasses  # noqa: F401  (used by the inlined code)
import hashlib  # noqa: F401  (used by the inlined code)
import inspect
import json
import math  # noqa: F401  (used by the inlined code)
import multiprocessing
import os
import re  # noqa: F401  (used by the inlined code)
import signal  # noqa: F401  (used by the inlined code)
import sys
import tempfile
import time  # noqa: F401  (used by the inlined code)
import traceback  # noqa: F401  (used by the inlined code)
from dataclasses import dataclass, field  # noqa: F401
from types import SimpleNamespace

# >>> hybridfuzz-data
TITLE = "a hybridfuzz case"
EXPECTED: dict | None = None  # the bug's signature (signature_check.Expected); None: any divergence counts
ENV: dict = {}  # the case's own environment for the engine
HARNESS_ENV: dict = {}  # hybridfuzz's settings for a small engine; a value already set in your shell wins
MODEL: dict = {"config": {}, "plan": {}, "seed": 0, "dtype": "bfloat16"}  # the tiny model: config.json, tensor plan, seed
DRAFT_MODEL: dict | None = None  # speculative method draft_model: the draft's tiny model, as MODEL; None: no draft
ENGINE: dict = {"cpu": {}, "cuda": {}}  # vllm.LLM arguments per device kind, less the model path
REFERENCE_ENGINE: dict | None = None  # the same for the reference run, when the case has one
GPUS: int = 0  # GPUs the case needs (engine.tensor_parallel_size above 1); 0: any machine
CASE = SimpleNamespace(steps=[], engine=SimpleNamespace(extra={}), oracle=SimpleNamespace(checks=["health"], reference={}))  # steps: (kind, arguments)
# <<< hybridfuzz-data

TIMEOUT_S = 600.0


def main(argv: list[str]) -> int:
    """Build the model, run the case (and its reference run where the verdict needs one), judge, decide."""
    block_here()  # hybridfuzz's torchvision guard, for this process
    os.environ.update(ENV)
    for name, value in HARNESS_ENV.items():
        os.environ.setdefault(name, value)
    guard_children()
    try:
        import torch
        import vllm
    except Exception as e:  # not installed, or a torch that cannot load
        print(f"DID NOT RUN: vLLM or torch does not import here: {type(e).__name__}: {e}".splitlines()[0])
        return DID_NOT_RUN
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    model_dir = build_model(keep or tempfile.mkdtemp(prefix=f"tiny-{MODEL['config'].get('model_type', 'model')}-"))
    if "--build-only" in argv:
        print(model_dir)
        return 0
    if DRAFT_MODEL is not None:
        give_draft(build_model(tempfile.mkdtemp(prefix="tiny-draft-"), DRAFT_MODEL))
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found < GPUS:  # vLLM would try (and fail on a device it cannot see, or assert on CPU): not the bug
        print(f"DID NOT RUN: needs {GPUS} GPUs, found {found}")
        return DID_NOT_RUN
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"
    print(f"vLLM {vllm.__version__}, torch {torch.__version__}, {device}; model {model_dir}")
    trace = run_isolated(ENGINE, model_dir)
    print_trace("case", trace)
    ref = None
    if REFERENCE_ENGINE is not None and trace.outcome == "ok" and check_health(trace, case=CASE).status == "pass":
        ref = run_isolated(REFERENCE_ENGINE, model_dir)  # judge reads it only when the case's own run is healthy
        print_trace("reference", ref)
    verdict = judge(CASE, trace, ref)
    return conclude(EXPECTED, verdict)  # exit 1 only for the bug's own signature (signature_check.decide)


def guard_children() -> None:
    """The same guard for the Python processes vLLM starts (model inspection, the engine core): a sitecustomize first on
    PYTHONPATH that applies it and then runs the sitecustomize this environment had. Only where the guard is needed."""
    if not _needed():
        return
    site_dir = tempfile.mkdtemp(prefix="repro-site-")
    parts = ["import os\nimport sys", f"BLOCKED = {BLOCKED!r}", inspect.getsource(_needed), inspect.getsource(block_here),
             inspect.getsource(chain_sitecustomize), "block_here()\nchain_sitecustomize(os.path.dirname(os.path.abspath(__file__)))"]
    with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
        f.write("\n\n".join(p.strip() for p in parts) + "\n")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [site_dir, os.environ.get("PYTHONPATH", "")] if p)


def chain_sitecustomize(own_dir: str) -> None:
    """Run the next sitecustomize on sys.path after ours (a distribution's or a virtualenv's own): ours shadows it."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != own_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def build_model(out_dir: str, model: dict | None = None) -> str:
    """config.json + model.safetensors of ``model`` (default MODEL): the same bytes as hybridfuzz's builder (its
    make_tensor, its plan)."""
    import torch
    from safetensors.torch import save_file

    model = model or MODEL
    os.makedirs(out_dir, exist_ok=True)
    dtype = getattr(torch, model["dtype"])
    tensors = {n: make_tensor(n, tuple(shape), model["seed"], tuple(init)).to(dtype).contiguous()
               for n, (shape, init) in model["plan"].items()}
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(model["config"], indent=2, sort_keys=True))
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        f.write(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    return out_dir


def give_draft(draft_dir: str) -> None:
    """Name the draft model's directory in every speculative_config of method draft_model that names none."""
    for engine in (ENGINE, REFERENCE_ENGINE or {}):
        for kwargs in engine.values():
            spec = kwargs.get("speculative_config")
            if spec and spec.get("method") == "draft_model" and not spec.get("model"):
                spec["model"] = draft_dir


def run_engine(engine: dict, model_dir: str, progress) -> Trace:
    """Start one engine and run the case's steps; exceptions become data, refusals and findings told apart by
    hybridfuzz's own rule (engines/base.py classify)."""
    import torch

    trace = Trace(env={"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"})
    try:
        import vllm
        from vllm.platforms import current_platform

        trace.env["vllm"] = vllm.__version__
        kind = "cuda" if current_platform.is_cuda_alike() else "cpu"
        llm = vllm.LLM(model=model_dir, **engine[kind])
    except Exception as e:
        trace.error = error_info(e)
        trace.outcome = classify(trace.error, "startup")
        return trace
    progress({"event": "started", "trace": trace.to_dict()})
    _steps(llm, CASE, trace, progress, 0)  # hybridfuzz's own step loop (engines/offline.py)
    return trace


def _child(engine: dict, model_dir: str, result_path: str, progress_path: str) -> None:
    block_here()
    progress = ProgressWriter(progress_path)  # flushed per line: a kill -9 loses nothing written
    try:
        trace = run_engine(engine, model_dir, progress)
    except BaseException as e:  # never leave the parent without a result
        trace = Trace(outcome="crash", error=error_info(e))
    write_result(result_path, [trace])


def wait_status(exitcode: int | None) -> int | None:
    """multiprocessing's exit code (-N: killed by signal N) as the wait status hybridfuzz's hosts read."""
    if exitcode is None:
        return None
    return -exitcode if exitcode < 0 else exitcode << 8


def run_isolated(engine: dict, model_dir: str) -> Trace:
    """run_engine in a fresh process. A crash or a hang becomes a Trace as in hybridfuzz's hosts (engines/isolation.py):
    its progress file names the step it died in, and the death its signal."""
    work = tempfile.mkdtemp(prefix="repro-run-")
    result_path, progress_path = os.path.join(work, "result.json"), os.path.join(work, "progress.jsonl")
    p = multiprocessing.get_context("spawn").Process(target=_child, args=(engine, model_dir, result_path, progress_path))
    p.start()
    p.join(TIMEOUT_S)
    if p.is_alive():
        p.kill()
        p.join(30)
        return rebuild(_events(progress_path), "timeout", ErrorInfo("Timeout", f"no result within {TIMEOUT_S:g} s; engine killed"))[-1]
    try:
        with open(result_path) as f:
            return Trace.from_dict(json.load(f)[0])
    except (OSError, ValueError, IndexError):
        outcome, error = _death(wait_status(p.exitcode))
        return rebuild(_events(progress_path), outcome, error)[-1]


def print_trace(label: str, trace: Trace) -> None:
    err = f": {trace.error.one_line()}" if trace.error else ""
    print(f"[{label}] outcome: {trace.outcome}{err}")
    for idx, outputs in trace.generate_results():
        for r, out in enumerate(outputs):
            print(f"[{label}] step {idx} req {r}: tokens {out.tokens} (cached prompt tokens: {out.num_cached_tokens})")


# >>> hybridfuzz-inline
from hybridfuzz._guard import BLOCKED, _needed, block_here  # noqa: E402
from hybridfuzz.case import STEP_KINDS  # noqa: E402  (the data block's steps become these classes)
from hybridfuzz.engines.base import classify, error_info  # noqa: E402
from hybridfuzz.engines.isolation import ProgressWriter, _death, _events, rebuild, write_result  # noqa: E402
from hybridfuzz.engines.offline import _steps  # noqa: E402
from hybridfuzz.executor import judge  # noqa: E402
from hybridfuzz.export.signature_check import DID_NOT_RUN, conclude  # noqa: E402
from hybridfuzz.model import make_tensor  # noqa: E402
from hybridfuzz.oracles.health import check_health  # noqa: E402
from hybridfuzz.trace import ErrorInfo, Trace  # noqa: E402
# <<< hybridfuzz-inline

CASE.steps = [STEP_KINDS[kind](**args) for kind, args in CASE.steps]  # the data block's (kind, arguments) as step records
if hasattr(CASE, "reference_data"):  # Case.reference_case(): the reference run's case, for the feature oracles
    CASE.reference_data.steps = [STEP_KINDS[kind](**args) for kind, args in CASE.reference_data.steps]
    CASE.reference_case = lambda: CASE.reference_data


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as e:  # the script's own machinery failed (no disk, a package missing): the bug never ran
        print(f"DID NOT RUN: {type(e).__name__}: {e}".splitlines()[0])
        code = DID_NOT_RUN
    sys.exit(code)
