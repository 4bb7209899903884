#!/usr/bin/env python3
"""Reproducer of a hybridfuzz component case (an engine-free property of vLLM's KV-cache code), with vLLM alone.

For ``scale_view_fill`` the check builds the hybrid KV-cache allocation through vLLM's own
classes (FullAttentionSpec, MambaBase.get_kv_cache_spec, get_kv_cache_groups,
allocate_kv_cache, bind_kv_cache), fills every byte with a sentinel, calls vLLM's
TritonAttentionImpl._ensure_scale_caches unmodified, and names every changed byte: which
view addresses it (GDN conv/ssm state of which layer, attention K/V data or scale) and
whose live state the block holds.

Exit 1 = reproduced (the property fails with the bug's recorded symptom), 0 = not
reproduced (it holds), 3 = did not run (vLLM or torch missing, this vLLM lacks the code
path or refuses the layout, another symptom).

This file is the template of ``hybridfuzz export`` for ``kind: component`` cases. In the
exported script the ``hybridfuzz-data`` block holds the case, and the ``hybridfuzz-inline``
block at the end becomes the source of the property's own check
(``hybridfuzz/components/<property>.py``, its layout builder ``_build.py``, the Verdict
record, the torchvision guard and ``signature_check.decide``), verbatim.
"""
from __future__ import annotations

import functools  # noqa: F401  (used by the inlined code)
import hashlib  # noqa: F401
import importlib  # noqa: F401
import os  # noqa: F401  (used by the inlined code)
import re  # noqa: F401  (used by the inlined code)
import sys
from collections import defaultdict  # noqa: F401
from dataclasses import dataclass, field  # noqa: F401
from types import SimpleNamespace

# >>> hybridfuzz-data
TITLE = "a hybridfuzz component case"
PROPERTY = "scale_view_fill"
DESCRIPTION = ""
EXPECTED: dict | None = None  # the bug's signature (signature_check.Expected); None: any divergence counts
CASE = SimpleNamespace(kind="component", component={"property": "scale_view_fill", "layout": {}})
# <<< hybridfuzz-data


def main(argv: list[str]) -> int:
    block_here()  # hybridfuzz's torchvision guard
    try:
        import torch
        import vllm
    except Exception as e:  # not installed, or a torch that cannot load
        print(f"DID NOT RUN: vLLM or torch does not import here: {type(e).__name__}: {e}".splitlines()[0])
        return DID_NOT_RUN
    print(f"vLLM {vllm.__version__}, torch {torch.__version__}; property {PROPERTY}")
    verdict = run(CASE)
    return conclude(EXPECTED, verdict)  # exit 1 only for the bug's own signature (signature_check.decide)


# >>> hybridfuzz-inline
from hybridfuzz._guard import block_here  # noqa: E402
from hybridfuzz.components.scale_view_fill import run  # noqa: E402  (the builder inlines the case's property instead)
from hybridfuzz.export.signature_check import DID_NOT_RUN, conclude  # noqa: E402
# <<< hybridfuzz-inline


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except Exception as e:  # the script's own machinery failed: the bug never ran
        print(f"DID NOT RUN: {type(e).__name__}: {e}".splitlines()[0])
        code = DID_NOT_RUN
    sys.exit(code)
