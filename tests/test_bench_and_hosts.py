"""The hosts and the benchmark's fixed cases, on the real CPU engine."""
import subprocess
import sys

import pytest

from hybridfuzz.bench.speed import bench_cases, engines_at_once, run_path
from hybridfuzz.case import Case, EngineConfig, Generate, Sleep, dump_case, load_case
from hybridfuzz.engines.forkserver import ForkServer
from hybridfuzz.engines.subprocess_host import SubprocessHost
from hybridfuzz.model import LINEAR, ModelSpec


def test_bench_cases_are_valid_cases():
    for case in bench_cases():
        assert load_case(dump_case(case)) == case


@pytest.mark.engine
def test_fast_path_runs_bench_cases_with_passing_verdicts():
    with ForkServer(workers=2, timeout=300) as host:
        res = run_path("fast", host, bench_cases()[:2], repeat=1, parallel=True)
    assert res.verdicts == ["pass", "pass"]
    assert res.peak_rss_mb > 100 and all(t > 0 for t in res.latencies)


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_hang_becomes_timeout_outcome_and_host_survives():
    """A real hang (a level-0 sleep pauses scheduling; the next offline generate never returns) is killed
    after the call's own window, not the host's, and the host runs the next case. A merely long case was
    used before: on a fast CPU every step reported progress within the window and it passed as 'ok'."""
    hang = Case(ModelSpec(layers=(LINEAR,)), [Sleep(level=0, mode="keep"), Generate([[5, 6, 7]], max_tokens=2)])
    with ForkServer(workers=1, timeout=300, warm=False) as host:
        trace = host.run(hang, timeout=15.0)
        assert trace.outcome == "timeout" and "no progress within 15 s" in trace.error.message
        assert [s.kind for s in trace.steps] == ["sleep", "generate"]  # killed in the step that hung
        ok = host.run(Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6, 7]], max_tokens=2)]))
        assert ok.outcome == "ok"


@pytest.mark.engine
def test_a_start_up_timeout_is_tried_again_with_twice_the_deadline():
    """executor.replay: a start-up that timed out counts only if it times out again with twice the deadline (a loaded
    host starts engines slowly: results/2026-12-04-h200-vllm0.33.0-int8-triage/). A quarter-second deadline stands in for the load
    (a 1 s one, 2 s on the retry, let a cold child start in 1.3 s on an AMX Xeon, 2026-12-04, and time out in its
    first generate instead); the message names the host's load for whoever triages it."""
    from hybridfuzz.executor import replay, startup_timed_out
    from hybridfuzz.oracles.health import check_health, startup_timeout

    case = Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6, 7]], max_tokens=2)])
    with ForkServer(workers=1, timeout=300, warm=False) as host:
        result = replay(case, host, timeout=0.25, alone=True)
        assert startup_timed_out(result) and result.trace.steps == [], result.verdict.summary
        assert "no progress within 0.5 s" in result.trace.error.message, result.trace.error.message
        assert "host load " in result.trace.error.message and " per core" in result.trace.error.message
        v = check_health(result.trace)
        assert startup_timeout(v.signature, v.summary)
        once = replay(case, host, timeout=0.25, alone=True, startup_retry=False)  # a generating worker's confirmation
        assert "no progress within 0.25 s" in once.trace.error.message, once.trace.error.message
        ok = replay(case, host, timeout=300.0, alone=True)
    assert ok.trace.outcome == "ok" and not startup_timed_out(ok)


@pytest.mark.engine
def test_naive_and_fast_paths_agree_token_for_token(host):
    case = Case(ModelSpec(), [Generate([[7, 8, 9, 10, 11]], max_tokens=6)], EngineConfig(kv_cache_dtype="float16"))
    fast = host.run(case)
    naive = SubprocessHost(timeout=600).run(case)
    assert fast.outcome == naive.outcome == "ok", (fast.error, naive.error)
    assert fast.steps[0].outputs[0].tokens == naive.steps[0].outputs[0].tokens
    assert naive.engine_settings["multiprocessing"] is True and fast.engine_settings["multiprocessing"] is False


@pytest.mark.engine
def test_engines_at_once_all_come_up_and_pass():
    r = engines_at_once(2, 300)
    assert r["engines"] == 2 and r["ok"] == r["passed"] == 2, r["failures"]
    assert r["failures"] == []
    assert 0 < r["startup_median_s"] <= r["startup_max_s"]
    assert 0 < r["startup_cpu_median_s"]  # the engine process's own CPU (engines/base.py cpu_seconds)
    assert r["wall_s"] > 0 and r["cases_per_min"] > 0
    assert r["peak_rss_mb"] > 100
    assert r["peak_gpu_mb"] == 0  # no nvidia-smi on this CPU machine


@pytest.mark.parametrize("value", ["x", "4,x", ",", "0", "2,-1"])
def test_bench_at_once_bad_count_is_exit_2_with_one_line(value):
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "bench", "--at-once", value], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
    assert len(lines) == 1 and lines[0].startswith("hybridfuzz: --at-once:") and repr(value) in lines[0], r.stderr
    assert r.stdout == ""


@pytest.mark.engine
def test_the_fork_server_starts_while_its_caller_works():
    """Entering the host only launches the server: its start (importing torch and vLLM) overlaps what the caller
    does meanwhile, such as a GPU worker drawing its first 100 sessions (26 s on a 2-core CPU); ``start`` then
    waits only for what is left, and a case runs as before."""
    import time

    host = ForkServer(workers=1, timeout=120, warm=False)
    t0 = time.perf_counter()
    with host:
        entered = time.perf_counter() - t0
        time.sleep(6)  # the caller's own work
        t1 = time.perf_counter()
        host.start()
        waited = time.perf_counter() - t1
        trace = host.run(Case(model=ModelSpec(layers=[LINEAR]), engine=EngineConfig(), steps=[Generate(prompts=[[1, 2, 3]], max_tokens=2)]))
    assert entered < 2, entered
    assert host.start_seconds > 6 and waited < host.start_seconds - 5, (host.start_seconds, waited)
    assert trace.outcome == "ok", trace.error
