"""Fault injection: re-create upstream hybrid-model bug classes inside the CPU engine.

Loaded by vLLM itself through the ``vllm.general_plugins`` entry point, in every engine
process of the environment. Without ``HYBRIDFUZZ_FAULT`` ``register()`` returns at once and
imports nothing (issue #14, defect 6: installing hybridfuzz must not change other vLLM runs).
With ``HYBRIDFUZZ_FAULT=name[:severity][,...]`` it wraps the vLLM functions the named faults
need (``hooks.py``). The fuzzer never reads the variable: it is how we measure that the
fuzzer finds bugs of these kinds on its own (``hybridfuzz bench --faults``). The catalogue,
with the upstream report each fault models, is ``catalogue.py``; ``names()`` lists it. The same
plugin applies ``HYBRIDFUZZ_MEND``'s candidate fixes (``mends.py``), the other way round.
"""
from __future__ import annotations

import os


def names() -> tuple[str, ...]:
    from hybridfuzz.faults.catalogue import FAULTS

    return tuple(FAULTS)


def register() -> None:
    if os.environ.get("HYBRIDFUZZ_MEND"):  # candidate upstream fixes (mends.py), for a triage's decisive replay
        from hybridfuzz.faults import mends

        mends.activate()
    text = os.environ.get("HYBRIDFUZZ_FAULT", "")
    if not text:
        return
    from hybridfuzz.faults import hooks
    from hybridfuzz.faults.spec import parse

    hooks.activate(parse(text, names()))
