"""Long-running campaigns: N workers, one shared example database, one findings
directory, signatures claimed so that a bug is shrunk and reported once.

Layout of a campaign directory DIR::

    DIR/campaign.json          budget, time spent, when each signature was first seen / reported
    DIR/summary.json           the aggregate (rewritten at every status tick and at the end)
    DIR/findings/<sig>.yaml    one case per signature (written atomically while it shrinks)
    DIR/hypothesis-db/         the local Hypothesis example database (a copy, with --redis)
    DIR/claims/<sig>.json      file claims (no --redis)
    DIR/heartbeats/<w>.json    file heartbeats (no --redis)
    DIR/workers/<i>/           events.jsonl (one line per case, appended across restarts),
                               summary.json (FuzzLoop's), state.json, sessions.jsonl, worker.log

Nothing is kept only in memory: a worker killed with ``kill -9`` at any moment
leaves its findings (atomic files), its examples (the Hypothesis database saves
each failing example while shrinking) and its statistics (events flushed per
line); restarted under the same name it takes its own claims back and goes on
shrinking from the database.

Claims. Before a worker writes or shrinks a signature it must hold the claim:
``SET hybridfuzz:sig:<sig> <claim> NX`` on Redis, or an ``O_EXCL`` file under
DIR/claims. A claim names the worker, its host and pid. It is *done* once the
finding file carries FuzzLoop's replay note (or was set aside as flaky); a done
signature is known to every worker. A claim that is not done is *stale* when its
holder's pid is dead on this host or its heartbeat is older than
``stale_after_s`` (2 min): then the next worker to meet the signature takes it
over.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from hybridfuzz.findings import filename
from hybridfuzz.store import write_atomic

DONE_MARK = "replayed on a fresh engine: same signature"
STALE_AFTER_S = 120.0
HEARTBEAT_S = 10.0
HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (killed, not yet reaped by its parent) counts as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


# ---------------------------------------------------------------- findings on disk

def finding_state(findings_dir: str, sig: str) -> str:
    """'done' (replayed, or set aside as flaky), 'open' (written, still shrinking or abandoned) or 'none'."""
    path = os.path.join(findings_dir, filename(sig))
    if os.path.exists(path + ".flaky"):
        return "done"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "none"
    return "done" if DONE_MARK in text else "open"


def done_signatures(findings_dir: str, *known_dirs: str) -> set[str]:
    """Known now: the finished findings of the campaign (an open one is not known yet: it may be
    resumed), plus every case under known_dirs."""
    from hybridfuzz.case import CaseError, load_case_file
    from hybridfuzz.findings import known_signatures

    sigs: set[str] = set()
    for path in glob.glob(os.path.join(findings_dir, "*.yaml")) + glob.glob(os.path.join(findings_dir, "*.yaml.flaky")):
        try:
            case = load_case_file(path)
        except (CaseError, OSError):
            continue
        if path.endswith(".flaky") or DONE_MARK in (case.note or ""):
            sigs |= {o.signature for o in case.observed if o.signature}
    return sigs | known_signatures(*known_dirs)


# ---------------------------------------------------------------- claims

class Claims:
    """Who may shrink which signature. Subclasses store claims in files or in Redis."""

    def __init__(self, worker: str, findings_dir: str, stale_after_s: float = STALE_AFTER_S):
        self.worker = worker
        self.findings_dir = findings_dir
        self.stale_after_s = stale_after_s
        self.pid = os.getpid()
        self.done: set[str] = set()
        self.mine: set[str] = set()
        self.takeovers: list[str] = []

    def _mine(self) -> str:
        return json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()})

    def _stale(self, claim: dict) -> bool:
        if claim.get("host") == HOST and not pid_alive(int(claim.get("pid", 0))):
            return True
        beat = self.heartbeat_of(claim.get("worker", ""))
        if beat is None:
            return time.time() - float(claim.get("t", 0)) > self.stale_after_s
        if beat.get("pid") != claim.get("pid") and beat.get("host") == claim.get("host") == HOST:
            # the worker restarted under the same name: the claim's process is gone, its name lives on
            return not pid_alive(int(claim.get("pid", 0)))
        return time.time() - float(beat.get("t", 0)) > self.stale_after_s

    def claim(self, sig: str) -> bool:
        if sig in self.done:
            return False
        if finding_state(self.findings_dir, sig) == "done":
            self.done.add(sig)
            self.set_done(sig)
            return False
        ok = self._claim(sig)
        if ok:
            self.mine.add(sig)
        return ok

    def sweep(self) -> None:
        """Mark this worker's finished signatures done, for workers on other hosts."""
        for sig in list(self.mine):
            if finding_state(self.findings_dir, sig) == "done":
                self.set_done(sig)
                self.mine.discard(sig)
                self.done.add(sig)

    # storage
    def _claim(self, sig: str) -> bool:
        raise NotImplementedError

    def set_done(self, sig: str) -> None:
        raise NotImplementedError

    def heartbeat(self) -> None:
        raise NotImplementedError

    def heartbeat_of(self, worker: str) -> dict | None:
        raise NotImplementedError

    def holder(self, sig: str) -> dict | None:
        raise NotImplementedError


class FileClaims(Claims):
    """Claims as files under DIR/claims (one host): O_EXCL creation, takeovers under a flock."""

    def __init__(self, campaign_dir: str, worker: str, findings_dir: str, stale_after_s: float = STALE_AFTER_S):
        super().__init__(worker, findings_dir, stale_after_s)
        self.dir = os.path.join(campaign_dir, "claims")
        self.beats = os.path.join(campaign_dir, "heartbeats")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.beats, exist_ok=True)

    def _path(self, sig: str) -> str:
        return os.path.join(self.dir, filename(sig)[: -len(".yaml")] + ".json")

    @contextlib.contextmanager
    def _lock(self):
        import fcntl

        with open(os.path.join(self.dir, ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def holder(self, sig: str) -> dict | None:
        try:
            with open(self._path(sig), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def _claim(self, sig: str) -> bool:
        path = self._path(sig)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(self._mine())
            return True
        with self._lock():
            held = self.holder(sig)
            if held is not None and held.get("done"):
                self.done.add(sig)
                return False
            if held is None or held.get("worker") == self.worker or self._stale(held):
                if held is not None and held.get("worker") != self.worker:
                    self.takeovers.append(sig)
                write_atomic(path, self._mine())
                return True
            return False

    def set_done(self, sig: str) -> None:
        with self._lock():
            held = self.holder(sig) or {"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}
            write_atomic(self._path(sig), json.dumps(dict(held, done=True)))

    def heartbeat(self) -> None:
        write_atomic(os.path.join(self.beats, filename(self.worker)[: -len(".yaml")] + ".json"),
                     json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}))

    def heartbeat_of(self, worker: str) -> dict | None:
        try:
            with open(os.path.join(self.beats, filename(worker)[: -len(".yaml")] + ".json"), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


class RedisClaims(Claims):
    """Claims in Redis (several hosts): SET NX decides, takeovers in a WATCH/MULTI transaction."""

    PREFIX = "hybridfuzz:sig:"
    BEAT = "hybridfuzz:hb:"

    def __init__(self, client, worker: str, findings_dir: str, stale_after_s: float = STALE_AFTER_S):
        super().__init__(worker, findings_dir, stale_after_s)
        self.r = client

    def holder(self, sig: str) -> dict | None:
        raw = self.r.get(self.PREFIX + sig)
        return json.loads(raw) if raw else None

    def _claim(self, sig: str) -> bool:
        import redis

        key = self.PREFIX + sig
        if self.r.set(key, self._mine(), nx=True):
            return True
        for _ in range(5):
            with self.r.pipeline() as pipe:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    held = json.loads(raw) if raw else None
                    if held is not None and held.get("done"):
                        self.done.add(sig)
                        return False
                    if held is not None and held.get("worker") != self.worker and not self._stale(held):
                        return False
                    pipe.multi()
                    pipe.set(key, self._mine())
                    pipe.execute()
                    if held is not None and held.get("worker") != self.worker:
                        self.takeovers.append(sig)
                    return True
                except redis.WatchError:
                    continue
        return False

    def set_done(self, sig: str) -> None:
        key = self.PREFIX + sig
        held = self.holder(sig) or json.loads(self._mine())
        self.r.set(key, json.dumps(dict(held, done=True)))

    def heartbeat(self) -> None:
        self.r.set(self.BEAT + self.worker, json.dumps({"worker": self.worker, "host": HOST, "pid": self.pid, "t": time.time()}),
                   ex=int(max(600, 5 * self.stale_after_s)))

    def heartbeat_of(self, worker: str) -> dict | None:
        raw = self.r.get(self.BEAT + worker)
        return json.loads(raw) if raw else None


def redis_client(url: str):
    import redis

    client = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=10, health_check_interval=30)
    client.ping()
    return client


def make_database(campaign_dir: str, redis_url: str | None):
    """The shared Hypothesis example database: DIR/hypothesis-db, plus Redis with a URL (each host keeps a copy)."""
    from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

    local = DirectoryBasedExampleDatabase(os.path.join(campaign_dir, "hypothesis-db"))
    if not redis_url:
        return local
    from hypothesis.extra.redis import RedisExampleDatabase

    return MultiplexedDatabase(local, RedisExampleDatabase(redis_client(redis_url), key_prefix=b"hybridfuzz-example:"))


class KeepOthersDatabase:
    """Wraps the shared database for one worker. Hypothesis deletes a replayed example that no
    longer fails; for this worker an example of a signature another worker is still shrinking does
    not fail (it is not its to shrink), but it is that worker's progress: keep it."""

    def __new__(cls, inner):
        from hypothesis.database import ExampleDatabase

        class _Keep(ExampleDatabase):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
                self.keep = False  # set by the claim hook for the example being run, cleared before the next

            def __repr__(self) -> str:
                return f"KeepOthersDatabase({self.inner!r})"

            def fetch(self, key):
                yield from self.inner.fetch(key)

            def save(self, key, value):
                self.inner.save(key, value)

            def delete(self, key, value):
                if not self.keep:
                    self.inner.delete(key, value)

            def move(self, src, dest, value):
                self.inner.move(src, dest, value)

        return _Keep(inner)


def make_claims(campaign_dir: str, worker: str, redis_url: str | None, stale_after_s: float = STALE_AFTER_S) -> Claims:
    findings = os.path.join(campaign_dir, "findings")
    if redis_url:
        return RedisClaims(redis_client(redis_url), worker, findings, stale_after_s)
    return FileClaims(campaign_dir, worker, findings, stale_after_s)


def worker_name(campaign_dir: str, index: int) -> str:
    import hashlib

    tag = hashlib.sha1(os.path.abspath(campaign_dir).encode()).hexdigest()[:8]
    return f"{HOST}/{tag}/w{index}"


# ---------------------------------------------------------------- one worker

def run_worker(campaign_dir: str, index: int, until: float, seed: int = 0, redis_url: str | None = None,
               engines: int = 1, timeout_s: float = 300.0, known_dirs: tuple[str, ...] = (),
               stale_after_s: float = STALE_AFTER_S, max_layers: int = 8, max_steps: int = 6,
               narrowing: dict | None = None) -> int:
    """One FuzzLoop until ``until`` (epoch seconds) or SIGTERM; its own out dir, the campaign's shared state.

    ``narrowing``: keyword arguments of strategies.platform.narrow (kv_dtypes, attention_backends, eager_only)."""
    from hybridfuzz.fuzzloop import FuzzConfig, FuzzLoop
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform
    from hybridfuzz.strategies.platform import narrow

    out = os.path.join(campaign_dir, "workers", str(index))
    findings = os.path.join(campaign_dir, "findings")
    os.makedirs(out, exist_ok=True)
    os.makedirs(findings, exist_ok=True)
    name = worker_name(campaign_dir, index)
    claims = make_claims(campaign_dir, name, redis_url, stale_after_s)
    database = KeepOthersDatabase(make_database(campaign_dir, redis_url))

    def claim(sig: str) -> bool:
        ok = claims.claim(sig)
        database.keep = not ok and sig not in claims.done
        return ok
    session_start = time.time()
    with open(os.path.join(out, "sessions.jsonl"), "a") as f:
        f.write(json.dumps({"start": session_start, "pid": os.getpid(), "host": HOST, "worker": name}) + "\n")
    claims.heartbeat()
    state = {"worker": name, "index": index, "pid": os.getpid(), "host": HOST, "session_start": session_start,
             "phase": "starting", "cases": 0, "findings": 0, "first_finding_at": None, "takeovers": []}
    loop_box: list = []
    stop = threading.Event()
    parent = os.getppid()

    def write_state() -> None:
        state["t"] = time.time()
        state["takeovers"] = list(claims.takeovers)
        write_atomic(os.path.join(out, "state.json"), json.dumps(state))

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            try:
                claims.heartbeat()
                claims.sweep()
                write_state()
                if loop_box:
                    loop_box[0].write_summary()
            except Exception as e:  # a Redis hiccup must not end the worker
                print(f"heartbeat: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            if os.getppid() != parent:  # the supervisor is gone: stop like on SIGTERM
                request_stop()

    def request_stop(*_a) -> None:
        state["phase"] = "stopping"
        if loop_box:
            loop_box[0]._deadline = 0.0  # FuzzLoop.body raises BudgetSpent at the next case

    def progress(stats, phase) -> None:
        database.keep = False  # called for each example before the claim hook
        state["phase"] = phase
        state["cases"] = stats.cases
        state["findings"] = len(stats.findings)
        if stats.first_finding_s is not None and state["first_finding_at"] is None:
            state["first_finding_at"] = stats.started + stats.first_finding_s

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    platform = narrow(detect_platform(), **(narrowing or {}))
    print(f"worker {name}: pid {os.getpid()}, engine {platform.device}, {until - time.time():.0f}s left, seed {seed}", flush=True)
    write_state()
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        with make_host("forkserver", workers=engines, timeout=timeout_s) as host:
            cfg = FuzzConfig(budget_s=max(0.0, until - time.time()), out_dir=out, findings_dir=findings, seed=seed,
                             timeout_s=timeout_s, known_dirs=tuple(known_dirs), database=database,
                             max_layers=max_layers, max_steps=max_steps, claim=claim,
                             known_fn=lambda: done_signatures(findings, *known_dirs))
            loop = FuzzLoop(cfg, host, platform, progress)
            loop_box.append(loop)
            if state["phase"] == "stopping":
                loop._deadline = 0.0
            state["phase"] = "generate"
            loop.run()
    finally:
        stop.set()
        claims.sweep()
        state["phase"] = "exited"
        write_state()
    return 0  # what it found is in DIR/findings; a crash exits non-zero and the campaign restarts the worker


# ---------------------------------------------------------------- statistics

def worker_stats(wdir: str) -> dict:
    """Cases, busy time and sessions of one worker, from its append-only events.jsonl (survives kill -9)."""
    cases, busy, sessions, last_t, phase = 0, 0.0, 0, None, None
    shrink_cases = 0
    try:
        with open(os.path.join(wdir, "events.jsonl"), encoding="utf-8") as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line cut by kill -9
                t = float(e.get("t", 0))
                if last_t is None or t < last_t:
                    sessions += 1
                    if last_t is not None:
                        busy += last_t
                last_t = t
                cases += 1
                phase = e.get("phase")
                shrink_cases += phase == "shrink"
    except OSError:
        pass
    busy += last_t or 0.0
    starts = 0
    try:
        with open(os.path.join(wdir, "sessions.jsonl"), encoding="utf-8") as f:
            starts = sum(1 for _ in f)
    except OSError:
        pass
    state = {}
    try:
        with open(os.path.join(wdir, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        pass
    return {"cases": cases, "shrink_cases": shrink_cases, "busy_s": round(busy, 1), "starts": starts,
            "last_phase": phase, "state": state}


def findings_list(campaign_dir: str) -> list[dict]:
    from hybridfuzz.case import CaseError, load_case_file
    from hybridfuzz.findings import case_size

    out = []
    fdir = os.path.join(campaign_dir, "findings")
    for path in sorted(glob.glob(os.path.join(fdir, "*.yaml")) + glob.glob(os.path.join(fdir, "*.yaml.flaky"))):
        try:
            case = load_case_file(path)
        except (CaseError, OSError):
            continue
        obs = case.observed[-1] if case.observed else None
        out.append({"signature": obs.signature if obs else None, "path": path, "summary": obs.summary if obs else "",
                    "state": "flaky" if path.endswith(".flaky") else ("done" if DONE_MARK in (case.note or "") else "open"),
                    "size": list(case_size(case))})
    return out


def load_meta(campaign_dir: str) -> dict:
    try:
        with open(os.path.join(campaign_dir, "campaign.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def aggregate(campaign_dir: str, meta: dict | None = None) -> dict:
    meta = meta if meta is not None else load_meta(campaign_dir)
    workers = {}
    for wdir in sorted(glob.glob(os.path.join(campaign_dir, "workers", "*")), key=lambda p: int(os.path.basename(p)) if os.path.basename(p).isdigit() else 0):
        workers[os.path.basename(wdir)] = worker_stats(wdir)
    cases = sum(w["cases"] for w in workers.values())
    spent = float(meta.get("spent_s", 0.0))
    found = meta.get("seen", {})
    first_found = [v["found_s"] for v in found.values() if v.get("found_s") is not None]
    first_reported = [v["reported_s"] for v in found.values() if v.get("reported_s") is not None]
    fl = findings_list(campaign_dir)
    return {
        "dir": os.path.abspath(campaign_dir), "budget_s": meta.get("budget_s"), "spent_s": round(spent, 1),
        "runs": meta.get("runs", 0), "workers": len(workers), "cases": cases,
        "cases_per_min": round(cases / (spent / 60), 2) if spent > 0 else None,
        "worker_busy_s": round(sum(w["busy_s"] for w in workers.values()), 1),
        "findings": sum(1 for f in fl if f["state"] == "done"), "findings_open": sum(1 for f in fl if f["state"] == "open"),
        "flaky": sum(1 for f in fl if f["state"] == "flaky"),
        "time_to_first_finding_s": min(first_found) if first_found else None,
        "time_to_first_report_s": min(first_reported) if first_reported else None,
        "database": meta.get("database"), "engine": meta.get("engine"), "seed": meta.get("seed"),
        "fault_injected": os.environ.get("HYBRIDFUZZ_FAULT", ""),
        "restarts": sum(max(0, w["starts"] - 1) for w in workers.values()),
        "finding_list": fl, "seen": found, "per_worker": workers,
    }


# ---------------------------------------------------------------- the supervisor

def gpu_count() -> int:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip()])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class Campaign:
    def __init__(self, campaign_dir: str, budget_s: float, workers: int = 0, redis_url: str | None = None,
                 engine: str = "cpu", seed: int = 0, engines: int = 0, timeout_s: float = 300.0,
                 known_dirs: tuple[str, ...] = (), status_every_s: float = 30.0, stale_after_s: float = STALE_AFTER_S,
                 max_layers: int = 8, max_steps: int = 6, log=print, restart_limit: int = 20,
                 narrowing: dict | None = None):
        self.dir = campaign_dir
        self.narrowing = narrowing or {}
        self.engine = engine
        gpus = gpu_count() if engine == "gpu" else 0
        if engine == "gpu" and not gpus:
            raise RuntimeError("--engine gpu: no GPU visible (nvidia-smi -L lists none)")
        cores = os.cpu_count() or 1
        self.workers = workers or (gpus if engine == "gpu" else max(1, cores // 2))
        self.engines = engines or (4 if engine == "gpu" else max(1, cores // self.workers))
        self.gpus = gpus
        self.redis_url = redis_url
        self.budget_s = budget_s
        self.seed = seed
        self.timeout_s = timeout_s
        self.known_dirs = known_dirs
        self.status_every_s = status_every_s
        self.stale_after_s = stale_after_s
        self.max_layers, self.max_steps = max_layers, max_steps
        self.log = log
        self.restart_limit = restart_limit
        self.procs: dict[int, subprocess.Popen] = {}
        self.restarts: dict[int, int] = {}
        self._stopping = False

    def _worker_cmd(self, i: int, until: float) -> list[str]:
        cmd = [sys.executable, "-m", "hybridfuzz.cli", "campaign-worker", "--dir", self.dir, "--index", str(i),
               "--until", repr(until), "--seed", str(self.seed * 100 + i), "--engines", str(self.engines),
               "--timeout", str(self.timeout_s), "--stale-after", str(self.stale_after_s),
               "--max-layers", str(self.max_layers), "--max-steps", str(self.max_steps)]
        if self.redis_url:
            cmd += ["--redis", self.redis_url]
        for k in self.known_dirs:
            cmd += ["--known", k]
        n = self.narrowing
        if n.get("kv_dtypes"):
            cmd += ["--kv-dtypes", n["kv_dtypes"]]
        if n.get("attention_backends"):
            cmd += ["--attention-backends", n["attention_backends"]]
        if n.get("eager_only"):
            cmd.append("--eager-only")
        return cmd

    def _start(self, i: int, until: float) -> None:
        env = dict(os.environ)
        if self.engine == "gpu":
            env["CUDA_VISIBLE_DEVICES"] = str(i % self.gpus)
        wdir = os.path.join(self.dir, "workers", str(i))
        os.makedirs(wdir, exist_ok=True)
        logf = open(os.path.join(wdir, "worker.log"), "a")
        # own session: a terminal's Ctrl-C reaches the supervisor only, which stops the workers in order
        self.procs[i] = subprocess.Popen(self._worker_cmd(i, until), env=env, stdout=logf, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        logf.close()

    def _save_meta(self, meta: dict) -> None:
        write_atomic(os.path.join(self.dir, "campaign.json"), json.dumps(meta, indent=2))

    def _observe(self, meta: dict, t_campaign: float) -> None:
        """Note when each signature first appears on disk and when it is first reported (done)."""
        seen = meta.setdefault("seen", {})
        for f in findings_list(self.dir):
            s = seen.setdefault(f["signature"], {"found_s": round(t_campaign, 1), "reported_s": None})
            if f["state"] != "open" and s["reported_s"] is None:
                s["reported_s"] = round(t_campaign, 1)

    def status_line(self, summary: dict, t: float, window: tuple[float, int]) -> str:
        rate = (summary["cases"] - window[1]) / max(1e-9, (t - window[0])) * 60
        parts = []
        for i, w in summary["per_worker"].items():
            p = self.procs.get(int(i)) if i.isdigit() else None
            alive = p is not None and p.poll() is None
            phase = (w["state"].get("phase") or "-") if w["state"].get("pid") == p.pid else "starting"  # type: ignore[union-attr]
            parts.append(f"w{i}:{phase if alive else 'down'}/{w['cases']}")
        return (f"[{summary['spent_s']:7.0f}s] cases {summary['cases']} ({rate:.1f}/min now, {summary['cases_per_min'] or 0}/min overall) "
                f"findings {summary['findings']} done, {summary['findings_open']} open  " + " ".join(parts))

    def stop(self, *_a) -> None:
        self._stopping = True

    def run(self) -> dict:
        os.makedirs(os.path.join(self.dir, "findings"), exist_ok=True)
        meta = load_meta(self.dir)
        spent0 = float(meta.get("spent_s", 0.0))
        meta.update({"budget_s": self.budget_s, "runs": int(meta.get("runs", 0)) + 1, "engine": self.engine,
                     "seed": self.seed, "workers": self.workers, "engines_per_worker": self.engines,
                     "database": ("redis+dir " + self.redis_url) if self.redis_url else "dir",
                     "spent_s": spent0})
        meta.setdefault("started", time.time())
        self._save_meta(meta)
        left = self.budget_s - spent0
        if left <= 0:
            self.log(f"campaign {self.dir}: budget {self.budget_s:.0f}s already spent ({spent0:.0f}s); raise --budget to go on")
            return self.finish(meta)
        t0 = time.time()
        until = t0 + left
        old = {s: signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)}
        self.log(f"campaign {self.dir}: {self.workers} workers x {self.engines} engines ({self.engine}), "
                 f"{left:.0f}s of {self.budget_s:.0f}s left, database {meta['database']}")
        try:
            for i in range(self.workers):
                self._start(i, until)
            last_status = time.time()
            window = (spent0, aggregate(self.dir, meta)["cases"])
            while True:
                time.sleep(1.0)
                now = time.time()
                meta["spent_s"] = spent0 + (now - t0)
                self._observe(meta, meta["spent_s"])
                if self._stopping:
                    break
                alive = 0
                for i, p in list(self.procs.items()):
                    rc = p.poll()
                    if rc is None:
                        alive += 1
                    elif rc != 0 and now < until - 5 and self.restarts.get(i, 0) < self.restart_limit:
                        self.restarts[i] = self.restarts.get(i, 0) + 1
                        self.log(f"worker {i} ended with status {rc}: restarting it ({self.restarts[i]})")
                        self._start(i, until)
                        alive += 1
                if not alive or now > until + 2 * self.timeout_s + 60:
                    break
                if now - last_status >= self.status_every_s:
                    self._save_meta(meta)
                    summary = aggregate(self.dir, meta)
                    write_atomic(os.path.join(self.dir, "summary.json"), json.dumps(summary, indent=2))
                    self.log(self.status_line(summary, meta["spent_s"], window))
                    window = (meta["spent_s"], summary["cases"])
                    last_status = now
        finally:
            self._shutdown()
            for s, h in old.items():
                signal.signal(s, h)
            meta["spent_s"] = spent0 + (time.time() - t0)
            self._observe(meta, meta["spent_s"])
        return self.finish(meta)

    def _shutdown(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        # a worker ends its case in flight (bounded by --timeout) and, mid-shrink, replays the target once
        deadline = time.time() + 2 * self.timeout_s + 60
        for p in self.procs.values():
            try:
                p.wait(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def finish(self, meta: dict) -> dict:
        self._save_meta(meta)
        summary = aggregate(self.dir, meta)
        write_atomic(os.path.join(self.dir, "summary.json"), json.dumps(summary, indent=2))
        return summary
