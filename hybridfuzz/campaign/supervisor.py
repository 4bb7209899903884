"""The campaign supervisor: N worker processes (``hybridfuzz campaign-worker``) until the
budget is spent; resumable, since the budget spent so far is kept in DIR/campaign.json."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Literal

from hybridfuzz.campaign import capacity, placement
from hybridfuzz.campaign.capacity import busy_cores, host_cpu_jiffies
from hybridfuzz.campaign.config import WorkerSettings
from hybridfuzz.campaign.stats import aggregate, findings_list, load_meta
from hybridfuzz.campaign.worker import make_store
from hybridfuzz.store import write_atomic
from hybridfuzz.triage import shared_features

Engine = Literal["cpu", "gpu"]


def gpu_count() -> int:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip()])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class CampaignSupervisor:
    """Starts the workers, restarts a worker that dies, notes when each signature is found and
    reported, writes DIR/campaign.json and DIR/summary.json, and stops every worker in order."""

    def __init__(self, campaign_dir: str, budget_s: float, workers: int = 0, engine: Engine = "cpu", seed: int = 0,
                 settings: WorkerSettings | None = None, status_every_s: float = 30.0,
                 log: Callable[[str], None] = print, on_status: Callable[[dict, dict[str, str]], None] | None = None,
                 restart_limit: int = 20, platform=None):
        self.dir = campaign_dir
        self.platform = platform  # detected already (by the command, to check narrowing flags); else run() detects it
        self.platform_file: str | None = None
        self.engine = engine
        gpus = gpu_count() if engine == "gpu" else 0
        if engine == "gpu" and not gpus:
            raise RuntimeError("--engine gpu: no GPU visible (nvidia-smi -L lists none)")
        cores = os.cpu_count() or 1
        settings = settings or WorkerSettings(engines=0)
        self.plan = None
        self.placements: list[placement.Placement] = []
        if engine == "gpu":
            # Fill the GPU: engines per GPU from its free memory and the measured footprint, capped by
            # the cores engine start-up is bound on; each worker runs a session and its reference.
            self.plan = capacity.detect()
            # TP=2 workers on GPU pairs, the others on single GPUs (campaign/placement.py)
            self.placements = placement.place(gpus, max(1, self.plan.workers_per_gpu))
            self.workers = workers or max(1, len(self.placements))
            use = settings.use if settings.use.shrink_parallel else dataclasses.replace(settings.use, shrink_parallel=self.plan.shrink_parallel)
            self.settings = dataclasses.replace(settings, engines=settings.engines or capacity.ENGINES_PER_WORKER, use=use,
                                                shrink_slots=settings.shrink_slots or gpus * self.plan.shrinks_per_gpu)
        else:
            self.workers = workers or max(1, cores // 2)
            self.settings = dataclasses.replace(settings, engines=settings.engines or max(1, cores // self.workers))
        self.gpus = gpus
        self.budget_s = budget_s
        self.seed = seed
        self.status_every_s = status_every_s
        self.log = log
        self.on_status = on_status
        self.store = make_store(campaign_dir, settings.redis_url)
        self.interrupted = False
        self.restart_limit = restart_limit
        self.procs: dict[int, subprocess.Popen] = {}
        self.restarts: dict[int, int] = {}
        self._stopping = False
        self._cpu0: tuple[int, int] | None = None

    def _worker_cmd(self, i: int, until: float) -> list[str]:
        cmd = [sys.executable, "-m", "hybridfuzz.cli", "campaign-worker", "--dir", self.dir, "--index", str(i),
               "--until", repr(until), "--seed", str(self.seed * 100 + i), *self.settings.argv()]
        if self.placements:
            cmd += ["--tensor-parallel", str(self.placements[i % len(self.placements)].tensor_parallel_size)]
        return cmd + (["--platform-file", self.platform_file] if self.platform_file else [])

    def _detect_platform(self) -> str | None:
        """Detect the platform once for all workers (DIR/platform.json): each worker detecting its own imported vLLM
        twelve times at once on a 16-core GPU host, beside twelve fork servers importing it too. None, with one
        line said, when detection fails here: each worker then detects its own and reports what went wrong."""
        from hybridfuzz.strategies import detect_platform

        path = os.path.join(self.dir, "platform.json")
        try:
            platform = self.platform or detect_platform()
        except Exception as e:  # a broken vLLM install: the workers meet it too, each in its own log
            self.log(f"campaign {self.dir}: platform not detected here ({type(e).__name__}: {e}); each worker detects its own")
            return None
        write_atomic(path, platform.to_json())
        return path

    def _start(self, i: int, until: float) -> None:
        env = dict(os.environ)
        if self.placements:
            env["CUDA_VISIBLE_DEVICES"] = self.placements[i % len(self.placements)].cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
        elif self.engine == "gpu":
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
        now = host_cpu_jiffies()
        if self._cpu0 is not None and now is not None:
            cores = os.cpu_count() or 1
            meta["host_cpu"] = {"cores": cores, "busy_cores": busy_cores(self._cpu0, now, cores)}
        for f in findings_list(self.store):
            s = seen.setdefault(f["signature"], {"found_s": round(t_campaign, 1), "reported_s": None})
            if f["state"] != "open" and s["reported_s"] is None:
                s["reported_s"] = round(t_campaign, 1)

    def phases(self, summary: dict) -> dict[str, str]:
        """Each worker's phase now: generate, shrink, starting, down, ..."""
        out = {}
        for i, w in summary["per_worker"].items():
            p = self.procs.get(int(i)) if i.isdigit() else None
            if p is None or p.poll() is not None:
                out[i] = "down"
            else:
                out[i] = (w["state"].get("phase") or "-") if w["state"].get("pid") == p.pid else "starting"
        return out

    def status_line(self, summary: dict, t: float, window: tuple[float, int]) -> str:
        rate = (summary["cases"] - window[1]) / max(1e-9, (t - window[0])) * 60
        phases = self.phases(summary)
        parts = [f"w{i}:{phases[i]}/{w['cases']}" for i, w in summary["per_worker"].items()]
        # the host's 1-minute load per core: a GPU campaign whose engines wait on the CPU shows it here
        load = os.getloadavg()[0] / max(1, len(os.sched_getaffinity(0)))
        cpu = summary.get("cpu", {})
        busy = f" cores busy {cpu['host_busy_cores']}/{cpu['host_cores']}" if cpu.get("host_busy_cores") is not None else ""
        return (f"[{summary['spent_s']:7.0f}s] cases {summary['cases']} ({rate:.1f}/min now, {summary['cases_per_min'] or 0}/min overall) "
                f"load/core {load:.2f}{busy} findings {summary['findings']} done, {summary['findings_open']} open  " + " ".join(parts))

    def stop(self, *_a) -> None:
        self._stopping = True
        self.interrupted = True

    def run(self) -> dict:
        os.makedirs(os.path.join(self.dir, "findings"), exist_ok=True)
        meta = load_meta(self.dir)
        spent0 = float(meta.get("spent_s", 0.0))
        redis_url = self.settings.redis_url
        meta.update({"budget_s": self.budget_s, "runs": int(meta.get("runs", 0)) + 1, "engine": self.engine,
                     "seed": self.seed, "workers": self.workers, "engines_per_worker": self.settings.engines,
                     "database": ("redis+dir " + redis_url) if redis_url else "dir",
                     "known": list(self.settings.known_dirs), "spent_s": spent0})
        meta.setdefault("started", time.time())
        self._save_meta(meta)
        left = self.budget_s - spent0
        if left <= 0:
            self.log(f"campaign {self.dir}: budget {self.budget_s:.0f}s already spent ({spent0:.0f}s); raise --budget to go on")
            return self.finish(meta)
        t0 = time.time()
        until = t0 + left
        self._cpu0 = host_cpu_jiffies()  # this run's start: summary.json's cpu.host_busy_cores is since then
        old = {s: signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)}
        self.platform_file = self._detect_platform()  # within the budget: it is the campaign's own time
        if self.plan is not None:
            self.log(f"campaign {self.dir}: {self.plan.describe()}; {placement.describe(self.placements)}")
        self.log(f"campaign {self.dir}: {self.workers} workers x {self.settings.engines} engines ({self.engine}), "
                 f"{left:.0f}s of {self.budget_s:.0f}s left, database {meta['database']}")
        try:
            # All at once, on a GPU too: a staggered start (one leader first, the rest once it had run steps) was
            # measured on an H200 (vLLM 0.26.0, 2026-12-01, results/2026-12-01-h200-vllm0.26.0-default-campaigns/): the leader's first
            # session took 100-240 s while 11 workers waited and the host's load stayed at 0.06-0.3 per core
            # (Triton compiles one kernel at a time per process), so it only delayed them.
            for i in range(self.workers):
                self._start(i, until)
            last_status = time.time()
            window = (spent0, aggregate(self.dir, meta, self.store)["cases"])
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
                if not alive or now > until + 2 * self.settings.timeout_s + 60:
                    break
                if now - last_status >= self.status_every_s:
                    self._save_meta(meta)
                    summary = aggregate(self.dir, meta, self.store)
                    write_atomic(os.path.join(self.dir, "summary.json"), json.dumps(summary, indent=2))
                    if self.on_status:
                        self.on_status(summary, self.phases(summary))
                    else:
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
        deadline = time.time() + 2 * self.settings.timeout_s + 60
        for p in self.procs.values():
            try:
                p.wait(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def finish(self, meta: dict) -> dict:
        self._save_meta(meta)
        summary = aggregate(self.dir, meta, self.store)
        summary["interrupted"] = self.interrupted
        summary["shared_features"] = shared_features.summary(self.dir)
        write_atomic(os.path.join(self.dir, "summary.json"), json.dumps(summary, indent=2))
        return summary
