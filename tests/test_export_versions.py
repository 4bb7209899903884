"""hybridfuzz export: the issue's "Versions" line says since when and fixed where (bisection.regression_text),
with the bisect command that showed it. Engine-free (CPU-runnable): the observations are written by hand, as
`hybridfuzz bisect` writes them into the case file."""
from __future__ import annotations

import dataclasses
import os

from hybridfuzz import export
from hybridfuzz.case import Observation, load_case_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
CASE = os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml")


def with_history(history: dict[str, str]):
    """The mamba-align corpus case with only the given CPU verdicts (version -> pass/divergence/unsupported)."""
    case = load_case_file(CASE)
    observed = [Observation(vllm=v, verdict=verdict, device="cpu", isa="x86_64/avx2", date="2026-11-30",
                            summary=f"{verdict} on {v}") for v, verdict in history.items()]
    return case.replace(observed=observed, expect=dict(history))


def versions_line(body: str) -> str:
    lines = [ln for ln in body.splitlines() if ln.startswith("**Versions**")]
    assert len(lines) == 1, lines
    return lines[0]


def test_issue_says_regressed_in_and_still_in_with_the_bisect_command():
    case = with_history({"0.15.1": "unsupported", "0.26.0": "pass", "0.27.0": "divergence", "0.32.0": "divergence"})
    body = export.issue_markdown(case, case_name="mamba-align.yaml", env_text="", env={})
    line = versions_line(body)
    assert line == "**Versions**: Regressed in 0.27.0, still in 0.32.0. Last good: 0.26.0. Cannot run it: 0.15.1."
    assert "`hybridfuzz bisect mamba-align.yaml --versions 0.15.1,0.26.0,0.27.0,0.32.0`" in body
    # before the status list, after the reproducer
    assert body.index("**Reproducer**") < body.index("**Versions**") < body.index("**Status per vLLM version**")


def test_issue_says_fixed_in_and_present_since():
    body = export.issue_markdown(with_history({"0.18.0": "divergence", "0.31.0": "divergence", "0.32.0": "pass"}),
                                 case_name="c.yaml", env_text="", env={})
    assert versions_line(body) == "**Versions**: Seen in 0.18.0, fixed in 0.32.0."
    body = export.issue_markdown(with_history({"0.17.1": "unsupported", "0.18.0": "divergence", "0.32.0": "divergence"}),
                                 case_name="c.yaml", env_text="", env={})
    assert versions_line(body) == ("**Versions**: Present since 0.18.0 (the oldest release that can run it), still in 0.32.0. "
                                   "Cannot run it: 0.17.1.")


def test_no_versions_line_without_a_divergence():
    body = export.issue_markdown(with_history({"0.32.0": "unsupported"}), case_name="c.yaml", env_text="", env={})
    assert "**Versions**" not in body


def test_cli_export_writes_the_versions_line(tmp_path):
    from hybridfuzz import cli
    from hybridfuzz.case import dump_case

    path = tmp_path / "mamba-align.yaml"
    path.write_text(dump_case(with_history({"0.26.0": "pass", "0.27.0": "divergence", "0.32.0": "divergence"})))
    rc = cli.main(["export", str(path), "--out", str(tmp_path / "issue.md"), "--no-collect-env"])
    assert rc == 0
    body = (tmp_path / "issue.md").read_text()
    assert versions_line(body).startswith("**Versions**: Regressed in 0.27.0, still in 0.32.0. Last good: 0.26.0.")
    assert "hybridfuzz bisect mamba-align.yaml --versions 0.26.0,0.27.0,0.32.0" in body


def test_a_release_failing_another_way_is_not_the_first_bad():
    """The mamba-align case as bisected on this box (2026-11-30): 0.23.0 fails at start-up in get_current_vllm_config,
    0.27.x pass, 0.28.0 on fail in get_mamba_groups. The regression is 0.28.0, not 0.23.0."""
    case = with_history({"0.8.5.post2": "unsupported", "0.18.0": "pass", "0.23.0": "divergence", "0.27.1": "pass",
                         "0.28.0": "divergence", "0.32.0": "divergence"})
    where = {"0.23.0": ("health:error:AssertionError:0ef72f8a", "case error at start-up: AssertionError: Current vLLM config is not set. "
                        "(at vllm/config/vllm.py:2224 in get_current_vllm_config)"),
             "0.28.0": ("health:error:AssertionError:d1283cbd", "case error at step 0 (generate): AssertionError: no mamba layers in "
                        "the model (at vllm/v1/worker/mamba_utils.py:555 in get_mamba_groups)"),
             "0.32.0": ("health:error:AssertionError:d1283cbd", "case error at step 0 (generate): AssertionError: no mamba layers in "
                        "the model (at vllm/v1/worker/mamba_utils.py:700 in get_mamba_groups)")}
    case = case.replace(observed=[dataclasses.replace(o, signature=where[o.vllm][0], summary=where[o.vllm][1]) if o.vllm in where else o
                                  for o in case.observed])
    line = versions_line(export.issue_markdown(case, case_name="c.yaml", env_text="", env={}))
    assert line == ("**Versions**: Regressed in 0.28.0, still in 0.32.0. Last good: 0.27.1. Fails another way in 0.23.0 "
                    "(health:error:AssertionError:0ef72f8a). Cannot run it: 0.8.5.post2.")
    from hybridfuzz.triage import bisection

    matrix = bisection.matrix_text({"c.yaml": case}).splitlines()
    assert "other" in matrix[0] and matrix[-1].split()[1:] == ["cannot", "pass", "other", "pass", "DIVERGE", "DIVERGE"]


def test_only_other_failures_here_give_no_versions_line():
    """The int8 NaN case on an AVX2 box: the NaN was seen on 0.32.0 elsewhere (AVX-512), this box's 0.32.0 refuses
    the dtype and older releases fail at start-up their own ways: nothing here says since when."""
    case = with_history({"0.20.2": "divergence", "0.32.0": "divergence"})
    obs = [dataclasses.replace(case.observed[0], signature="health:error:RuntimeError:fcca585d",
                               summary="case error at start-up: RuntimeError: Chunked-prefill and prefix-cache on the CPU backend is not "
                                       "compatible with FP8 KV cache. (at vllm/v1/attention/backends/cpu_attn.py:88 in __init__)"),
           dataclasses.replace(case.observed[1], signature="health:nonfinite:2ffbd58c", isa="x86_64/avx512",
                               summary="case step 0 request 1: non-finite logprob at token 1"),
           dataclasses.replace(case.observed[1], verdict="unsupported", summary="FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")]
    case = case.replace(observed=obs, expect={"0.20.2": "divergence", "0.32.0": "divergence"})
    assert "**Versions**" not in export.issue_markdown(case, case_name="c.yaml", env_text="", env={})
    from hybridfuzz.triage import bisection

    assert bisection.matrix_text({"c.yaml": case}).splitlines()[-1].split()[1:] == ["other", "cannot"]
