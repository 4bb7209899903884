"""Campaigns: claims (files and a real Redis), statistics that survive kill -9, and
a real two-worker CPU campaign sharing Redis that finds the injected wake-up
crash, reports it once, and loses nothing when a worker is killed mid-shrink."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

import hybridfuzz  # noqa: F401  (torchvision guard before vLLM)
from hybridfuzz.campaign import claims as C
from hybridfuzz.campaign.database import KeepOthersDatabase, redis_client
from hybridfuzz.campaign.records import FindingState, iter_events
from hybridfuzz.campaign.state import FindingStore
from hybridfuzz.campaign.stats import aggregate

REDIS_SERVER = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A real redis-server of our own on a random loopback port (skipped without the binary or the client)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install -y redis-server)")
    pytest.importorskip("redis", reason="the redis client is not installed (pip install -e .[redis])")
    d = tmp_path_factory.mktemp("redis")
    for _ in range(3):
        port = _free_port()
        proc = subprocess.Popen([REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                                 "--dir", str(d)], stdout=open(d / "redis.log", "a"), stderr=subprocess.STDOUT)
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(100):
            if proc.poll() is not None:
                break
            try:
                redis_client(url)
                break
            except Exception:
                time.sleep(0.05)
        else:
            proc.kill()
            continue
        if proc.poll() is None:
            break
    else:
        pytest.fail(f"redis-server did not start; see {d / 'redis.log'}")
    yield url
    proc.terminate()
    proc.wait(10)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _finding(store: FindingStore, findings_dir, sig: str, state: FindingState) -> None:
    from hybridfuzz.case import Case, Generate, Observation
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.triage.findings import write_finding

    case = Case(model=ModelSpec(layers=("linear_attention", "full_attention")), steps=[Generate(prompts=[[5, 6, 7]], max_tokens=2)],
                note="found by test", observed=[Observation(vllm="0", verdict="divergence", device="cpu", signature=sig)])
    store.set(sig, state, write_finding(str(findings_dir), case), case)


def _store(kind, tmp_path, redis_url=None) -> FindingStore:
    return FindingStore(str(tmp_path), redis_client(redis_url) if kind == "redis" else None)


def _claims(kind, tmp_path, worker, redis_url=None, stale=120.0):
    store = _store(kind, tmp_path, redis_url)
    if kind == "redis":
        return C.RedisClaims(redis_client(redis_url), worker, store, stale)
    return C.FileClaims(str(tmp_path), worker, store, stale)


@pytest.fixture(params=["file", "redis"])
def claims_pair(request, tmp_path):
    url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    if url:
        redis_client(url).flushdb()
    (tmp_path / "findings").mkdir()
    make = lambda worker, stale=120.0: _claims(request.param, tmp_path, worker, url, stale)  # noqa: E731
    make.store = _store(request.param, tmp_path, url)
    return make, tmp_path


def test_claim_is_exclusive_reentrant_and_done_is_final(claims_pair):
    make, tmp = claims_pair
    a, b = make("host/a"), make("host/b")
    a.heartbeat(), b.heartbeat()
    assert a.claim("crash:X") is True
    assert b.claim("crash:X") is False          # a is alive and beating
    assert b.taken_elsewhere("crash:X") and not a.taken_elsewhere("crash:X") and not b.taken_elsewhere("crash:new")
    assert a.claim("crash:X") is True           # its own claim
    assert make("host/a").claim("crash:X")      # the same worker restarted takes its claim back
    _finding(make.store, tmp / "findings", "crash:X", FindingState.OPEN)
    assert b.claim("crash:X") is False          # an open finding is still a's
    assert C.done_signatures(make.store) == set()
    _finding(make.store, tmp / "findings", "crash:X", FindingState.REPLAYED)
    a.sweep()
    assert b.claim("crash:X") is False and "crash:X" in b.done
    assert a.taken_elsewhere("crash:X")          # done: nobody needs to confirm it again
    assert C.done_signatures(make.store) == {"crash:X"}
    _finding(make.store, tmp / "findings", "crash:F", FindingState.FLAKY)  # set aside: done too
    assert C.done_signatures(make.store) == {"crash:X", "crash:F"}


def test_stale_claim_is_taken_over(claims_pair):
    make, tmp = claims_pair
    # (1) the holder's pid is dead on this host
    dead = make("host/dead")
    dead.pid = _dead_pid()
    dead.heartbeat()
    assert dead.claim("crash:Y")
    taker = make("host/taker")
    taker.heartbeat()
    assert not taker.taken_elsewhere("crash:Y")  # its holder is dead: worth confirming and taking over
    assert taker.claim("crash:Y") is True and taker.takeovers == ["crash:Y"]
    assert taker.holder("crash:Y")["worker"] == "host/taker"
    assert dead.claim("crash:Y") is False or dead.pid == taker.pid  # the old holder lost it
    # (2) the holder is on another host and its heartbeat is older than stale_after
    far = make("otherhost/w0", stale=0.5)
    far_host = "otherhost.example"
    orig = C.HOST
    try:
        C.HOST = far_host
        far.heartbeat()
        assert far.claim("crash:Z")
    finally:
        C.HOST = orig
    quick = make("host/quick", stale=0.5)
    assert quick.claim("crash:Z") is False       # heartbeat fresh: not stale yet
    time.sleep(0.8)
    assert quick.claim("crash:Z") is True and "crash:Z" in quick.takeovers


def test_finding_states_round_trip_in_files(tmp_path):
    store = FindingStore(str(tmp_path))
    (tmp_path / "findings").mkdir()
    assert store.get("crash:S") is None and store.all() == {}
    _finding(store, tmp_path / "findings", "crash:S", FindingState.OPEN)
    assert store.get("crash:S") is FindingState.OPEN and not FindingState.OPEN.done
    _finding(store, tmp_path / "findings", "crash:S", FindingState.FLAKY)
    rec = FindingStore(str(tmp_path)).all()["crash:S"]  # a fresh reader (campaign-status, report)
    assert rec.state is FindingState.FLAKY and rec.state.done and rec.path.endswith(".yaml")


def test_findings_and_states_are_shared_through_redis(redis_url, tmp_path, capsys):
    """Host A writes a finding; host B (another directory, same Redis) sees it in status and report."""
    import json as _json

    from hybridfuzz import cli

    redis_client(redis_url).flushdb()
    a, b = tmp_path / "hostA", tmp_path / "hostB"
    (a / "findings").mkdir(parents=True)
    b.mkdir()
    store_a = FindingStore(str(a), redis_client(redis_url))
    _finding(store_a, a / "findings", "crash:R", FindingState.OPEN)
    store_b = FindingStore(str(b), redis_client(redis_url))
    assert store_b.get("crash:R") is FindingState.OPEN
    _finding(store_a, a / "findings", "crash:R", FindingState.REPLAYED)
    rec = store_b.all()["crash:R"]
    assert rec.state is FindingState.REPLAYED and "linear_attention" in rec.text  # the case itself travels too
    (b / "campaign.json").write_text(_json.dumps({"spent_s": 1.0}))
    assert cli.main(["campaign-status", "--dir", str(b), "--redis", redis_url, "--json"]) == 0
    status = _json.loads(capsys.readouterr().out)
    assert status["findings"] == 1 and [f["signature"] for f in status["finding_list"]] == ["crash:R"]
    assert cli.main(["campaign-status", "--dir", str(b), "--json"]) == 0  # without --redis: only this host's files
    assert _json.loads(capsys.readouterr().out)["finding_list"] == []
    (b / "workers" / "0").mkdir(parents=True)
    (b / "workers" / "0" / "events.jsonl").write_text('{"t": 1, "phase": "generate", "status": "divergence", "signature": "crash:R"}\n')
    assert cli.main(["report", str(b), "--redis", redis_url]) == 0
    page = (b / "report.html").read_text()
    assert "crash:R" in page and "<td>replayed</td>" in page  # the finding of host A, with its state


def test_statistics_survive_a_cut_line_and_restarts(tmp_path):
    w = tmp_path / "workers" / "0"
    w.mkdir(parents=True)
    lines = [{"t": 1.0, "phase": "generate"}, {"t": 5.0, "phase": "shrink"},   # the first start, killed
             {"t": 2.0, "phase": "generate"}, {"t": 7.5, "phase": "generate"}]  # the restart
    (w / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines) + '{"t": 9.0, "pha')
    (w / "sessions.jsonl").write_text('{"start": 1}\n{"start": 2}\n')
    problems: list[str] = []
    assert [e.t for e in iter_events(str(tmp_path), problems)] == [1.0, 5.0, 2.0, 7.5] and len(problems) == 1
    agg = aggregate(str(tmp_path), {"spent_s": 60.0})
    s = agg["per_worker"]["0"]
    assert (s["cases"], s["shrink_cases"], s["busy_s"], s["starts"]) == (4, 1, 12.5, 2)
    assert agg["cases"] == 4 and agg["cases_per_min"] == 4.0 and agg["restarts"] == 1


def test_statistics_say_what_was_drawn_and_what_it_cost(tmp_path):
    """Families, graph modes, model memory, median session and case seconds per graph mode, and the rate after the first
    case (a GPU host's cold JIT excluded); events written before these fields existed count as '?'."""
    w = tmp_path / "workers" / "0"
    w.mkdir(parents=True)
    lines = [{"t": 150.0, "wall": 1150.0, "family": "lfm2", "graphs": "graphs", "seconds": 3.0, "session_s": 18.0,
              "startup_s": 12.0, "steps_s": 0.5, "memory": "long", "startup_cpu_s": 9.5, "cpu_s": 10.0},
             {"t": 151.0, "wall": 1151.0, "family": "lfm2", "graphs": "graphs", "seconds": 3.0, "session_s": 18.0, "memory": "short",
              "cpu_s": 0.25},
             {"t": 160.0, "wall": 1160.0, "family": "qwen3_next", "graphs": "eager", "seconds": 1.0, "session_s": 6.0},
             {"t": 170.0, "wall": 1170.0, "seconds": 2.0}]
    (w / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (w / "summary.json").write_text(json.dumps({"sessions_s": 90.0, "confirm_s": 18.0, "engine_cpu_s": 40.0,
                                                "startup_cpu_s": 30.0, "worker_cpu_s": 5.0}))
    agg = aggregate(str(tmp_path), {"spent_s": 180.0, "host_cpu": {"cores": 16, "busy_cores": 14.96}})
    assert agg["worker_in_sessions_fraction"] == 0.5 and agg["worker_confirming_fraction"] == 0.1
    assert agg["families"] == {"lfm2": 2, "qwen3_next": 1, "?": 1}
    assert agg["graphs"] == {"graphs": 2, "eager": 1, "?": 1}
    assert agg["memory"] == {"long": 1, "short": 1, "?": 2}
    assert agg["median_session_s"] == {"graphs": 18.0, "eager": 6.0}
    assert agg["median_case_s"] == {"graphs": 3.0, "eager": 1.0, "?": 2.0}
    assert agg["cases_per_min"] == round(4 / 3, 2) and agg["cases_per_min_after_first"] == 9.0  # 3 cases in 20 s
    assert agg["median_startup_s"] == 12.0 and agg["steps_s_total"] == 0.5  # warm cases (0) do not count as starts
    assert agg["median_startup_cpu_s"] == 9.5 and agg["median_warm_case_cpu_s"] == 0.25
    assert agg["cpu"] == {"engine_cpu_s": 40.0, "startup_cpu_s": 30.0, "worker_cpu_s": 5.0, "host_busy_cores": 14.96, "host_cores": 16}


# ---------------------------------------------------------------- a real campaign

def _events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except OSError:
        return []


@pytest.fixture(scope="module")
def fault_campaign(tmp_path_factory, redis_url):
    """Two CPU workers sharing Redis, HYBRIDFUZZ_FAULT=wake-zero; the first worker seen shrinking is
    killed with kill -9 and restarted by the campaign. Returns (dir, summary, log, killed)."""
    d = tmp_path_factory.mktemp("campaign")
    redis_client(redis_url).flushdb()
    budget = int(os.environ.get("HYBRIDFUZZ_CAMPAIGN_TEST_BUDGET", "270"))
    env = dict(os.environ, HYBRIDFUZZ_FAULT="wake-zero")
    log = open(d / "campaign.log", "w")
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.cli", "campaign", "--dir", str(d), "--budget", f"{budget}s",
                             "--workers", "2", "--engines", "1", "--redis", redis_url, "--status-every", "15", "--timeout", "120",
                             # the fault needs a KV dtype other than the model's; float16 runs on any x86 CPU (fp8 needs AVX-512)
                             "--kv-dtypes", "float16", "--families", "qwen3_next"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    killed = None
    try:
        while proc.poll() is None and time.time() - t0 < budget + 400:
            time.sleep(0.5)
            if killed is None:
                for i in ("0", "1"):
                    wdir = d / "workers" / i
                    if any(e.get("phase") == "shrink" for e in _events(wdir / "events.jsonl")):
                        state = json.loads((wdir / "state.json").read_text()) if (wdir / "state.json").exists() else {}
                        pid = state.get("pid")
                        if pid and C.pid_alive(pid):
                            os.kill(pid, signal.SIGKILL)
                            killed = {"worker": i, "pid": pid, "at_s": round(time.time() - t0, 1),
                                      "findings_then": sorted(os.listdir(d / "findings"))}
                            break
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    summary = json.loads((d / "summary.json").read_text())
    print(json.dumps({k: summary[k] for k in ("spent_s", "cases", "cases_per_min", "findings", "findings_open",
                                                "time_to_first_finding_s", "time_to_first_report_s", "restarts")}), killed)
    return d, summary, (d / "campaign.log").read_text(), killed


@pytest.mark.engine
def test_two_workers_sharing_redis_report_the_fault_once(fault_campaign):
    d, summary, log, _ = fault_campaign
    wake = [f for f in summary["finding_list"] if "wake" in (f["signature"] or "").lower() or "zero_" in f["summary"]]
    assert wake, f"the wake-up crash was not found:\n{log[-3000:]}"
    sigs = [f["signature"] for f in summary["finding_list"]]
    assert len(sigs) == len(set(sigs)) and len(os.listdir(d / "findings")) == len(set(sigs))
    assert len(wake) == 1, sigs
    assert summary["per_worker"]["0"]["cases"] > 0 and summary["per_worker"]["1"]["cases"] > 0, "both workers ran cases"


@pytest.mark.engine
def test_campaign_status_says_how_far_repeats_drifted_per_feature(fault_campaign):
    """Each case event keeps its repeated requests' largest drift; campaign-status --noise groups them per feature
    (here one family and one KV dtype, on a CPU where repeats are bit-identical unless the fault or chunking moves them)."""
    d, summary, _, _ = fault_campaign
    drifts = [e["repeat_drift"] for w in ("0", "1") for e in _events(d / "workers" / w / "events.jsonl")
              if "repeat_drift" in e and e["phase"] == "generate"]
    assert drifts and any(x is not None for x in drifts) and any(x is None for x in drifts), drifts[:20]
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "campaign-status", "--dir", str(d), "--noise", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    status = json.loads(r.stdout)
    floor = {(f["feature"], f["value"]): f for f in status["drift_floor"]}
    # same-schedule repeats apart (held exact): every case event says, None where it had none
    exact = [e["exact_drift"] for w in ("0", "1") for e in _events(d / "workers" / w / "events.jsonl") if e["phase"] == "generate"]
    assert exact and isinstance(status["exact_drift_floor"], list)
    assert sum(f["cases"] for f in status["exact_drift_floor"] if f["feature"] == "family") == sum(x is not None for x in exact)
    fam = floor[("family", "qwen3_next")]
    assert fam["cases"] == sum(x is not None for x in drifts) and fam["max"] == max(x for x in drifts if x is not None)
    assert ("kv_cache_dtype", "float16") in floor and fam["median"] <= fam["p99"] <= fam["max"]
    assert summary["shared_features"]["tested"] >= 0 and "error" not in summary["shared_features"]  # the final summary has it
    # against the reference engine too (float16 KV here, auto there): every case with a reference says how far it was
    ref = [e.get("reference_drift") for w in ("0", "1") for e in _events(d / "workers" / w / "events.jsonl") if e["phase"] == "generate"]
    assert any(x is not None for x in ref), ref[:20]
    assert sum(f["cases"] for f in status["reference_drift_floor"] if f["feature"] == "family") == sum(x is not None for x in ref)


@pytest.mark.engine
def test_kill9_mid_shrink_loses_no_finding(fault_campaign):
    from hybridfuzz.case import load_case_file

    d, summary, log, killed = fault_campaign
    assert killed is not None, f"no worker was seen shrinking:\n{log[-3000:]}"
    assert killed["findings_then"], "a finding file exists as soon as shrinking starts"
    w = summary["per_worker"][killed["worker"]]
    assert w["starts"] >= 2, f"the killed worker was restarted: {w}"
    files = sorted(os.listdir(d / "findings"))
    for name in killed["findings_then"]:
        assert name in files or name + ".flaky" in files, (name, files)
    for name in files:
        case = load_case_file(str(d / "findings" / name))  # complete, parseable
        assert case.observed and case.observed[-1].signature
    assert summary["findings"] >= 1, f"the finding was replayed and reported after the restart: {summary['finding_list']}"


def test_only_a_process_first_run_replays_the_example_database():
    """A run after a finding would replay the finding's shrink steps from the database, each a re-find; the first run
    of a process replays them, as a killed run resumes so. Checked on Hypothesis itself (no engine): one failing run
    saves its shrunk example, 500000; a later run replays it, another later run does not."""
    from hypothesis import given, settings, strategies as st
    from hypothesis.database import InMemoryExampleDatabase

    from hybridfuzz.campaign.loop import hypothesis_phases

    db = InMemoryExampleDatabase()

    def run(first: bool, fail: bool) -> list[int]:
        seen: list[int] = []

        @settings(database=db, max_examples=20, phases=hypothesis_phases(first), deadline=None)
        @given(st.integers(0, 10**6))
        def test(n):
            seen.append(n)
            assert not (fail and n >= 500_000)

        try:
            test()
        except AssertionError:
            pass
        return seen

    while 500_000 not in run(first=True, fail=True):  # until a run found and shrank the failure
        pass
    assert 500_000 not in run(first=False, fail=False)
    assert 500_000 in run(first=True, fail=False)


def test_a_worker_keeps_examples_another_worker_is_shrinking():
    from hypothesis.database import InMemoryExampleDatabase

    inner = InMemoryExampleDatabase()
    db = KeepOthersDatabase(inner)
    db.save(b"k", b"x")
    db.keep = True   # the claim hook declined: another worker's open signature
    db.delete(b"k", b"x")
    assert list(inner.fetch(b"k")) == [b"x"]
    db.keep = False  # known/done or this worker's own: Hypothesis may clean up
    db.delete(b"k", b"x")
    assert list(inner.fetch(b"k")) == []


@pytest.mark.engine
@pytest.mark.smoke  # the fast tier's real-engine test of a campaign and its resume (conftest.py)
@pytest.mark.engine
def test_a_campaign_resumes_with_the_budget_it_has_left(tmp_path):
    """DIR/campaign.json keeps the budget spent: the same --dir with the same budget runs nothing more, and with a
    larger one runs only what is left, keeping the findings folder and the cases counted. On a loaded machine the
    first budget may end before the worker's engine starts, so the budget grows until cases ran (a condition, not a
    fixed time)."""
    from hybridfuzz.campaign.config import EngineUse, WorkerSettings
    from hybridfuzz.campaign.supervisor import CampaignSupervisor

    said: list[str] = []

    def campaign(budget_s: float) -> dict:
        return CampaignSupervisor(str(tmp_path), budget_s, workers=1, engine="cpu", status_every_s=600,
                                  settings=WorkerSettings(max_layers=1, use=EngineUse(max_steps=2)), log=said.append).run()

    budget, runs = 40, 1
    summary = campaign(budget)
    assert json.loads((tmp_path / "campaign.json").read_text())["spent_s"] >= budget - 5 and (tmp_path / "findings").is_dir()
    before = summary["cases"]
    spent = json.loads((tmp_path / "campaign.json").read_text())["spent_s"]
    campaign(budget)
    runs += 1
    # the same budget again: nothing left to run, or (when the first run's workers stopped a little before the
    # deadline, as on a loaded machine: 38 of 40 s) only the seconds left
    expected = "already spent" if spent >= budget else f"{budget - spent:.0f}s of {budget}s left"
    assert any(expected in line for line in said), (expected, said)
    extra = 40
    while True:
        spent = json.loads((tmp_path / "campaign.json").read_text())["spent_s"]
        budget = spent + extra
        summary = campaign(budget)
        runs += 1
        assert any(f"{extra}s of {budget:.0f}s left" in line for line in said), said[-5:]
        assert summary["cases"] >= before
        if summary["cases"] > 0 or extra >= 640:
            break
        extra *= 2  # each run starts its worker's engine anew: on a loaded machine that alone can take a minute
    meta = json.loads((tmp_path / "campaign.json").read_text())
    assert meta["runs"] == runs and meta["spent_s"] >= budget - 5, meta  # the workers stop at the deadline, give or take
    assert summary["cases"] > 0, said


@pytest.mark.slow  # a CLI or campaign in its own process: over a minute
def test_every_worker_starts_at_once_and_events_say_each_models_memory(tmp_path):
    """Workers start together (a staggered GPU start only delayed them: see CampaignSupervisor.run); every event of
    a real campaign names its model's memory and the summary counts them, and says where the CPU went (engine
    start-ups, warm cases, the workers, the host)."""
    from hybridfuzz.campaign.config import EngineUse, WorkerSettings
    from hybridfuzz.campaign.supervisor import CampaignSupervisor

    said: list[str] = []
    campaign = CampaignSupervisor(str(tmp_path), 60, workers=2, engine="cpu", status_every_s=600,
                                  settings=WorkerSettings(max_layers=2, use=EngineUse(max_steps=2)), log=said.append)
    summary = campaign.run()
    starts = [json.loads(line)["start"] for w in ("0", "1") for line in open(tmp_path / "workers" / w / "sessions.jsonl")]
    assert len(starts) == 2 and abs(starts[0] - starts[1]) < 20, (starts, said)
    assert {e.memory for e in iter_events(str(tmp_path))} <= {"short", "long"}
    assert summary["cases"] > 0 and sum(summary["memory"].values()) == summary["cases"]
    cpu = summary["cpu"]
    assert 0 < cpu["startup_cpu_s"] < cpu["engine_cpu_s"] and cpu["worker_cpu_s"] > 0, cpu
    assert 0 < cpu["host_busy_cores"] <= cpu["host_cores"] == os.cpu_count(), cpu
    assert summary["median_startup_cpu_s"] > 0, summary["median_startup_cpu_s"]
    # the platform was detected once, by the supervisor, and both workers ran on it (no vLLM import of their own)
    platform_file = str(tmp_path / "platform.json")
    for w in ("0", "1"):
        assert f"platform from {platform_file}" in (tmp_path / "workers" / w / "worker.log").read_text()


def test_a_platform_survives_its_file_and_a_worker_loads_it(tmp_path):
    """The supervisor writes the platform it detected as JSON; a worker reads it back equal (tuples, the backends'
    KV dtypes), so narrowing and ``takes`` behave as on the detected one."""
    from hybridfuzz.campaign.worker import load_platform
    from hybridfuzz.strategies import detect_platform

    detected = detect_platform()
    path = tmp_path / "platform.json"
    path.write_text(detected.to_json())
    loaded = load_platform(str(path))
    assert loaded == detected
    assert all(isinstance(v, tuple) for v in loaded.backend_kv_dtypes.values())
    # a file that holds no platform: one line naming the option and the file, exit 2, no traceback
    for text in ('{"device": "cuda"}', "[1, 2]", "device: cuda\n"):
        path.write_text(text)
        r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "campaign-worker", "--dir", str(tmp_path / "c"), "--index", "0",
                            "--until", "0", "--platform-file", str(path)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (text, r.stderr[-1500:])
        assert f"--platform-file {path}: not a platform written by campaign" in r.stderr, (text, r.stderr)


@pytest.mark.slow  # a CLI or campaign in its own process: over a minute
def test_a_worker_handed_the_platform_draws_and_checks_cases_without_importing_vllm(tmp_path):
    """A worker's own work (drawing sessions, the strict loader's checks of each case, the corpus's signatures) needs
    vLLM's accepted values; the platform file carries them (vllm_facts.shared), so the worker never imports vLLM or
    torch: on the H200 (2026-12-03) twelve workers importing vLLM at a campaign's start took 15 % of the host's CPU."""
    from hybridfuzz.strategies import detect_platform

    detected = detect_platform()
    assert detected.vllm_facts["kv_cache_dtypes"] and "auto" in detected.vllm_facts["mamba_dtypes"], detected.vllm_facts
    path = tmp_path / "platform.json"
    path.write_text(detected.to_json())
    code = f"""
import sys
from hybridfuzz import vllm_facts
from hybridfuzz.campaign.loop import draw_ahead
from hybridfuzz.campaign.worker import load_platform
from hybridfuzz.case import dump_case, load_case
from hybridfuzz.triage.findings import known_signatures
from hybridfuzz.strategies import sessions
platform = load_platform({str(path)!r})
drawn = draw_ahead(sessions(platform, 8, 12, 4), 0, 40)
checked = [load_case(dump_case(c)) for s in drawn for c in s]
print(len(checked), len(known_signatures("corpus")), vllm_facts.kv_cache_dtypes() == tuple(platform.vllm_facts["kv_cache_dtypes"]))
print(sorted(m for m in ("vllm", "torch") if m in sys.modules))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    counts, imported = r.stdout.strip().splitlines()[-2:]
    cases, sigs, same = counts.split()
    assert int(cases) >= 40 and int(sigs) > 0 and same == "True", r.stdout
    assert imported == "[]", r.stdout


@pytest.mark.engine
def test_background_shrinker_goes_on_after_a_job_that_fails(tmp_path):
    """A job that raises (its file is gone here; a fork server that would not restart on the H200) leaves that
    finding open and the shrinker thread alive: the next finding is still shrunk and replayed on a real engine."""
    from hybridfuzz.campaign.background import BackgroundShrinker
    from hybridfuzz.case import Case, Generate, Observation, dump_case
    from hybridfuzz.hosts import make_host
    from hybridfuzz.model import LINEAR, ModelSpec

    good = tmp_path / "good.yaml"
    stale = Observation(vllm="0.26.0", verdict="divergence", summary="case error at step 5 (wake_up): before shrinking")
    good.write_text(dump_case(Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6, 7]], max_tokens=2)], observed=[stale])))
    done, said = [], []
    shrinker = BackgroundShrinker(lambda: make_host("forkserver", workers=2, timeout=300, warm=False), parallel=1,
                                  budget_s=0.0, timeout_s=300, on_done=done.append, log=said.append)
    shrinker.submit("health:error:X:1", str(tmp_path / "gone.yaml"))
    shrinker.submit("", str(good))
    shrinker.close(time.time() + 600)
    assert any("health:error:X:1" in line and "left open" in line for line in said), said
    # and what each shrink did, for the worker's log (nothing of it reached the log on the H200, 2026-12-04)
    assert any("cut short after" in line and "replay shows it" in line for line in said), said
    assert [o.path for o in done] == [str(good)] and done[0].replays  # a passing case replays as a pass ("")
    # the replay's observation replaces the one made before shrinking (its step may be gone from the minimal case)
    assert [o.verdict for o in done[0].case.observed] == ["pass"], done[0].case.observed
    assert shrinker.pending == 0


@pytest.mark.engine
def test_background_shrinker_gives_a_sometimes_finding_the_tries_its_recorded_rate_needs(tmp_path):
    """A finding taken up again with a recorded rate (1 of 3 runs here) is shrunk with the tries `hybridfuzz shrink`
    would give it (reproduce.recorded_rate, shrink_tries), and one seen every time with one: the campaign's shrinker
    judged every variant once, and a finding that shows in half its runs lost half the simplifications that keep it."""
    from hybridfuzz.campaign.background import BackgroundShrinker
    from hybridfuzz.case import Case, Generate, Observation, dump_case
    from hybridfuzz.hosts import make_host
    from hybridfuzz.model import LINEAR, ModelSpec
    from hybridfuzz.triage.reproduce import shrink_tries

    sig = "health:error:X:1"
    paths = {}
    for name, runs, hits in [("sometimes", 3, 1), ("always", 2, 2)]:
        seen = Observation(vllm="0.32.0", verdict="divergence", signature=sig, runs=runs, reproduced=hits, summary="x")
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(dump_case(Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6, 7]], max_tokens=2)],
                                              observed=[seen])))
    said = []
    shrinker = BackgroundShrinker(lambda: make_host("forkserver", workers=1, timeout=300, warm=False), parallel=1,
                                  budget_s=0.0, timeout_s=300, on_done=lambda o: None, log=said.append)
    for path in paths.values():
        shrinker.submit(sig, str(path))
    shrinker.close(time.time() + 600)
    shrinking = [line for line in said if "shrinking" in line]
    assert len(shrinking) == 2 and shrink_tries(1, 3) > 1, said
    assert f"{shrink_tries(1, 3)} tries a batch (1 of 3 runs recorded)" in shrinking[0], shrinking
    assert "tries" not in shrinking[1], shrinking


def test_background_shrinker_takes_crashes_first_then_in_order():
    """Two shrink slots a host cannot keep up with a GPU campaign's findings (36 open of 39 on the H200,
    2026-12-03): the health oracle's go first, the rest in the order found, the end marker last."""
    from hybridfuzz.campaign.background import BackgroundShrinker, ShrinkJob

    shrinker = BackgroundShrinker(lambda: None, parallel=1, budget_s=0.0, timeout_s=1, on_done=lambda o: None)
    for sig in ("self_consistency:wake-differs:1", "reference:beyond-noise:2", "health:nonfinite:3",
                "self_consistency:reload-differs:4", "health:crash:SIGABRT:5"):
        shrinker._put(ShrinkJob(sig, sig))
    shrinker._put(None)
    order = [shrinker._jobs.get() for _ in range(6)]
    assert [j.signature.rsplit(":", 1)[-1] if j else None for j in order] == ["3", "5", "1", "2", "4", None]


def test_background_shrinker_takes_one_finding_of_each_kv_dtype_and_oracle_kind_first(tmp_path):
    """Past the health findings, a KV dtype's second finding waits for every other dtype's first, and within a round
    an oracle kind's second for the other kinds' first (the 0.33.0 campaign of 2026-12-03: 13 of 36 findings one
    per-token-head class, no shrink finished)."""
    from hybridfuzz.campaign.background import BackgroundShrinker, ShrinkJob
    from hybridfuzz.case import Case, EngineConfig, Generate, dump_case
    from hybridfuzz.model import LINEAR, ModelSpec

    def job(name, signature, dtype):
        path = tmp_path / f"{name}.yaml"
        path.write_text(dump_case(Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6]], max_tokens=2)],
                                       engine=EngineConfig(kv_cache_dtype=dtype))))
        return ShrinkJob(signature, str(path))

    shrinker = BackgroundShrinker(lambda: None, parallel=1, budget_s=0.0, timeout_s=1, on_done=lambda o: None)
    for name, sig, dtype in [("a", "self_consistency:first-request-differs:1", "int8_per_token_head"),
                             ("b", "self_consistency:first-request-differs:2", "int8_per_token_head"),
                             ("c", "self_consistency:reload-differs:3", "int8_per_token_head"),
                             ("d", "self_consistency:first-request-differs:4", "auto"),
                             ("e", "health:nonfinite:5", "int8_per_token_head"),
                             ("f", "self_consistency:first-request-differs:6", "fp8_e4m3"),
                             ("g", "reference:beyond-noise:7", "auto")]:
        shrinker._put(job(name, sig, dtype))
    shrinker._put(None)
    order = [shrinker._jobs.get() for _ in range(8)]
    # e: health (int8's first); d, f: auto's and fp8's first; c and g: int8's and auto's second, each its oracle
    # kind's first; a and b: the first-request kind's third and fourth, in the order found
    assert [j.path.rsplit("/", 1)[-1][0] if j else None for j in order] == ["e", "d", "f", "c", "g", "a", "b", None]


@pytest.mark.engine
def test_background_shrinker_confirms_a_deferred_history_before_shrinking_it(tmp_path):
    """A warm engine's history handed over unconfirmed (campaign/confirm.py Confirmer.defer_history) is replayed first, on a real engine:
    one that does not reproduce its signature is settled as not replayed after that one replay, with no shrink (the
    replay's observation kept beside the warm one); one that does is shrunk, then replayed, as any finding is."""
    from hybridfuzz.campaign.background import BackgroundShrinker
    from hybridfuzz.case import Generate, Observation, dump_case, load_case_file
    from hybridfuzz.hosts import make_host
    from hybridfuzz.model import LINEAR, ModelSpec

    here = os.path.dirname(os.path.abspath(__file__))
    asleep = load_case_file(os.path.join(here, "..", "corpus", "found", "wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml"))
    real_sig = asleep.observed[-1].signature
    # the real bug's history, padded with a first case's generate
    history = asleep.replace(steps=[Generate([[5, 6, 7]], max_tokens=2), *asleep.steps], observed=[], note="")
    warm = Observation(vllm="0.32.0", verdict="divergence", summary="met on a warm engine", signature=real_sig)
    real = tmp_path / "real.yaml"
    real.write_text(dump_case(history.replace(observed=[warm])))
    noise = tmp_path / "noise.yaml"
    warm_noise = Observation(vllm="0.32.0", verdict="divergence", summary="met on a warm engine",
                             signature="self_consistency:repeat-differs:00000000")
    noise.write_text(dump_case(history.replace(model=ModelSpec(layers=(LINEAR,)), steps=[Generate([[5, 6, 7]], max_tokens=2)],
                                               observed=[warm_noise])))
    done = []
    shrinker = BackgroundShrinker(lambda: make_host("forkserver", workers=2, timeout=300, warm=False), parallel=2,
                                  budget_s=240.0, timeout_s=300, on_done=done.append)
    shrinker.submit(warm_noise.signature, str(noise), confirm=True)
    shrinker.submit(real_sig, str(real), confirm=True)
    shrinker.close(time.time() + 900)
    by_path = {o.path: o for o in done}
    flaky = by_path[str(noise)]
    assert not flaky.replays and flaky.engine_runs <= 2, flaky  # one replay (and its reference), no shrink
    assert [o.verdict for o in flaky.case.observed] == ["divergence", "pass"], flaky.case.observed
    found = by_path[str(real)]
    assert found.replays and found.case.observed[-1].signature == real_sig, found
    assert len(found.case.steps) < len(history.steps), found.case.steps  # shrunk: at least the padding is gone


@pytest.mark.engine
def test_background_shrinker_replays_a_start_up_timeout_before_shrinking_it(tmp_path):
    """A start-up timeout is confirmed before any shrink (a loaded H200 made 12 of them in one run, 2026-12-04): on a
    real engine that starts, it is settled as not replayed after that one replay (the replay's pass kept beside it),
    and no engine runs go to shrinking toward it."""
    from hybridfuzz.campaign.background import BackgroundShrinker
    from hybridfuzz.case import Case, Generate, Observation, dump_case
    from hybridfuzz.hosts import make_host
    from hybridfuzz.model import LINEAR, ModelSpec

    slow = Observation(vllm="0.33.0", verdict="divergence", signature="health:timeout:Timeout:dd27d43b",
                       summary="case timeout at start-up: Timeout: no progress within 300 s; engine killed (start-up)")
    path = tmp_path / "slow.yaml"
    path.write_text(dump_case(Case(ModelSpec(layers=(LINEAR,)), [Generate([[5, 6, 7]], max_tokens=2)], observed=[slow])))
    done, said = [], []
    shrinker = BackgroundShrinker(lambda: make_host("forkserver", workers=2, timeout=300, warm=False), parallel=2,
                                  budget_s=240.0, timeout_s=300, on_done=done.append, log=said.append)
    shrinker.submit(slow.signature, str(path))  # as a fresh engine's finding: no confirm asked for
    shrinker.close(time.time() + 900)
    (outcome,) = done
    assert not any("shrinking" in line for line in said), said
    assert not outcome.replays and outcome.engine_runs <= 2, outcome
    assert [o.verdict for o in outcome.case.observed] == ["divergence", "pass"], outcome.case.observed


def test_shrink_slots_are_shared_by_processes_and_freed_when_a_holder_dies(tmp_path):
    """All workers of a host share its shrink slots (campaign/slots.py): a slot held by another process is
    not taken; past the deadline a shrink goes on without one; a killed holder frees its slot."""
    from hybridfuzz.campaign.slots import ShrinkSlots

    d = str(tmp_path / "shrink-slots")
    code = ("import sys, time\nfrom hybridfuzz.campaign.slots import ShrinkSlots\n"
            "with ShrinkSlots(sys.argv[1], 1).hold() as i:\n    print(i, flush=True)\n    time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, d], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        slots = ShrinkSlots(d, 1)
        t0 = time.time()
        with slots.hold(deadline=t0 + 1.5, poll_s=0.1) as got:
            assert got is None and time.time() - t0 >= 1.4
    finally:
        holder.kill()
        holder.wait()
    with slots.hold(deadline=time.time() + 5, poll_s=0.1) as got:
        assert got == 0
    two = ShrinkSlots(d, 2)
    with two.hold() as a, two.hold() as b:
        assert {a, b} == {0, 1}


@pytest.mark.parametrize("cwd,given,expected", [("checkout", None, ["corpus"]), ("checkout", "own", ["own"]),
                                                ("elsewhere", None, [])])
def test_campaign_knows_the_corpus_by_default_as_fuzz_does(tmp_path, cwd, given, expected):
    """In a checkout a bug already in the corpus is not reported again by ``fuzz``; ``campaign`` knew nothing unless
    told, and so met the corpus's bugs again (both take their known set from cli/options.known_dirs now)."""
    run_in = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) if cwd == "checkout" else str(tmp_path)
    d = tmp_path / "c"
    d.mkdir()
    (d / "campaign.json").write_text(json.dumps({"spent_s": 5.0}))  # budget already spent: no worker starts
    argv = [sys.executable, "-m", "hybridfuzz.cli", "campaign", "--dir", str(d), "--budget", "1s"]
    if given:
        (tmp_path / given).mkdir()
        argv += ["--known", str(tmp_path / given)]
        expected = [str(tmp_path / given)]
    r = subprocess.run(argv, cwd=run_in, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((d / "campaign.json").read_text())["known"] == expected
