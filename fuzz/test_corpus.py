"""Replay every corpus case and compare with the verdict it expects for the installed vLLM.

Cases without an expectation for this version are replayed for health only
(no crash of hybridfuzz itself); a case that expects ``divergence`` must still
diverge, so a fixed bug shows up as a failing expectation to update.
"""
import glob
import os

import pytest

from hybridfuzz.case import load_case_file
from hybridfuzz.executor import evaluate
from hybridfuzz.vllm_facts import vllm_version

ROOT = os.path.join(os.path.dirname(__file__), "..", "corpus")
CASES = sorted(p for p in glob.glob(os.path.join(ROOT, "**", "*.yaml"), recursive=True))


@pytest.mark.engine
@pytest.mark.parametrize("path", CASES, ids=[os.path.relpath(p, ROOT) for p in CASES])
def test_corpus_case_matches_expectation(engine_host, path):
    case = load_case_file(path)
    expected = case.expect.get(vllm_version())
    if expected is None:
        pytest.skip(f"no expectation recorded for vLLM {vllm_version()}")
    if "HYBRIDFUZZ_FAULT" in os.environ:
        pytest.skip("a fault is injected: expectations describe the unmodified engine")
    result = evaluate(case, engine_host)
    assert result.verdict.status == expected, f"{path}: expected {expected}, got {result.verdict.one_line()}"
