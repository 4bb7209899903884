"""Hypothesis searches for the three component properties; failures become component cases.

``search(prop, examples)`` runs Hypothesis over the property's strategy and, on a
failure, returns the shrunk example's Verdict and a ``kind: component`` Case
(``write_found`` stores it with hybridfuzz.store.write_atomic). ``fuzz_target(prop)``
is the same @given test, whose ``.hypothesis.fuzz_one_input`` is what atheris drives.
Layouts vLLM refuses are rejected (``assume``), not counted as failures.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from hypothesis import HealthCheck, Phase, assume, given, settings

from hybridfuzz.components import component_case
from hybridfuzz.oracles.verdict import Verdict


class PropertyFailed(AssertionError):
    def __init__(self, verdict: Verdict, body: dict):
        self.verdict, self.body = verdict, body
        super().__init__(verdict.one_line())


def _checkers() -> dict[str, tuple[Callable, Callable[[object], dict]]]:
    from hypothesis import strategies as st

    from hybridfuzz.components import kv_layout, scale_view_fill, wake_reinit
    from hybridfuzz.strategies import layouts as L

    return {
        "scale_view_fill": (L.hybrid_layouts(), lambda x: {"layout": x}, lambda b: scale_view_fill.check(b["layout"])),
        "wake_kv_reinit": (L.runner_kv_entries(), lambda x: {"entries": x, "kv_cache_dtype": "fp8"}, lambda b: wake_reinit.check(b["entries"], b["kv_cache_dtype"])),
        "kv_layout": (st.one_of(L.layer_spec_sets().map(lambda x: {"layout": x}), L.block_pool_runs().map(lambda x: {"pool": x})),
                      lambda x: x,
                      lambda b: kv_layout.check_block_pool(int(b["pool"]["num_blocks"]), b["pool"]["ops"], b["pool"]["enable_caching"]) if "pool" in b else kv_layout.check_layout(b["layout"])),
    }


PROPERTIES = ("scale_view_fill", "wake_kv_reinit", "kv_layout")


def property_test(prop: str, on_verdict: Callable[[Verdict, dict], None] | None = None):
    """The undecorated-settings @given test for ``prop``: raises PropertyFailed on divergence."""
    strategy, to_body, check = _checkers()[prop]

    @given(strategy)
    def test(x):
        body = to_body(x)
        v = check(body)
        if on_verdict:
            on_verdict(v, body)
        assume(v.status != "unsupported" or v.symptom not in ("layout-rejected",))
        if v.status == "divergence":
            raise PropertyFailed(v, body)

    test.__name__ = f"test_{prop}"
    return test


@dataclass
class SearchResult:
    prop: str
    verdict: Verdict | None  # the shrunk failure, or None
    case: object | None
    examples: int
    unsupported: str = ""


def search(prop: str, examples: int = 100, seed: int | None = None, shrink: bool = True) -> SearchResult:
    seen = {"n": 0, "unsupported": ""}

    def count(v: Verdict, body: dict) -> None:
        seen["n"] += 1
        if v.status == "unsupported" and v.symptom != "layout-rejected":
            seen["unsupported"] = v.summary

    phases = [Phase.generate, Phase.target] + ([Phase.shrink] if shrink else [])
    test = settings(max_examples=examples, deadline=None, database=None, derandomize=seed is None, phases=phases,
                    suppress_health_check=list(HealthCheck), print_blob=False)(property_test(prop, count))
    if seed is not None:
        from hypothesis import seed as hseed

        test = hseed(seed)(test)
    try:
        test()
    except PropertyFailed as e:
        case = component_case(prop, e.body, note=f"found by hybridfuzz check-components: {e.verdict.summary}")
        return SearchResult(prop, e.verdict, case, seen["n"])
    return SearchResult(prop, None, None, seen["n"], seen["unsupported"])


def write_found(result: SearchResult, out_dir: str) -> str:
    from hybridfuzz.case import Observation, dump_case
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.findings import OBSERVED_EVIDENCE
    from hybridfuzz.vllm_facts import vllm_version

    v = result.verdict
    obs = Observation(vllm=vllm_version(), verdict=v.status, oracle=v.oracle, summary=v.summary, signature=v.signature, evidence=v.evidence[:OBSERVED_EVIDENCE])
    case = result.case.replace(observed=[obs], expect={vllm_version(): v.status})
    path = os.path.join(out_dir, f"{result.prop}-{v.signature.rsplit(':', 1)[-1]}.yaml")
    write_atomic(path, dump_case(case))
    return path
