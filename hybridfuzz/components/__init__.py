"""Component properties: vLLM's KV-cache machinery driven directly, no engine.

A ``kind: component`` case names its property in ``component.property``:

* ``scale_view_fill``: creating per-token-head scale views changes no cache byte (scale_view_fill.py)
* ``wake_kv_reinit``: post-wake-up KV re-init accepts tensor/list/None entries (wake_reinit.py)
* ``kv_layout``: hybrid KV-cache config promises: views in bounds, block-for-block aliasing, block pool ownership (kv_layout.py)
"""
from __future__ import annotations

import importlib

from hybridfuzz.oracles.verdict import Verdict

PROPERTIES = {
    "scale_view_fill": "hybridfuzz.components.scale_view_fill",
    "wake_kv_reinit": "hybridfuzz.components.wake_reinit",
    "kv_layout": "hybridfuzz.components.kv_layout",
}


def run_component(case) -> Verdict:
    prop = (case.component or {}).get("property")
    if prop not in PROPERTIES:
        return Verdict("unsupported", f"component:{prop}", f"unknown component property {prop!r} (known: {', '.join(PROPERTIES)})", symptom="unknown-property")
    return importlib.import_module(PROPERTIES[prop]).run(case)


def component_case(prop: str, body: dict, note: str = "", expect: dict | None = None):
    """A ``kind: component`` Case for ``prop``; model/steps are placeholders the schema requires (never run)."""
    from hybridfuzz.case import Case, ResetPrefixCache
    from hybridfuzz.model import ModelSpec

    layers = tuple((body.get("layout") or {}).get("layers") or ("linear_attention", "full_attention"))[:8]
    return Case(model=ModelSpec(layers=layers), steps=[ResetPrefixCache()], kind="component",
                component={"property": prop, **body}, note=note, expect=dict(expect or {}))
