"""One campaign worker: a FuzzLoop until its deadline or SIGTERM, in its own directory
DIR/workers/<i>/ (events.jsonl, summary.json, state.json, sessions.jsonl, worker.log),
sharing the campaign's findings, example database, claims and finding states.

Nothing is kept only in memory: a worker killed with ``kill -9`` at any moment leaves its
findings (atomic files), its examples (the Hypothesis database saves each failing example
while shrinking) and its statistics (events flushed per line); restarted under the same
name it takes its own claims back and goes on shrinking from the database.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time

from hybridfuzz import vllm_facts
from hybridfuzz.campaign.claims import HOST, Claims, FileClaims, RedisClaims, done_signatures
from hybridfuzz.campaign.config import FuzzConfig, WorkerSettings
from hybridfuzz.campaign.database import KeepOthersDatabase, make_database, redis_client
from hybridfuzz.campaign.placement import pinned
from hybridfuzz.campaign.slots import ShrinkSlots
from hybridfuzz.campaign.state import FindingStore
from hybridfuzz.case import device_kind
from hybridfuzz.hosts import make_host
from hybridfuzz.store import write_atomic
from hybridfuzz.triage.ledger import ledger_of

HEARTBEAT_S = 10.0


def make_store(campaign_dir: str, redis_url: str | None) -> FindingStore:
    return FindingStore(campaign_dir, redis_client(redis_url) if redis_url else None)


def make_claims(campaign_dir: str, worker: str, store: FindingStore, redis_url: str | None, stale_after_s: float) -> Claims:
    if redis_url:
        return RedisClaims(redis_client(redis_url), worker, store, stale_after_s)
    return FileClaims(campaign_dir, worker, store, stale_after_s)


def worker_name(campaign_dir: str, index: int) -> str:
    tag = hashlib.sha1(os.path.abspath(campaign_dir).encode()).hexdigest()[:8]
    return f"{HOST}/{tag}/w{index}"


def load_platform(platform_file: str):
    """The platform the supervisor detected once for all workers (campaign/supervisor.py), its vLLM facts adopted
    (this process then draws and checks cases without importing vLLM); ValueError, naming the file, when it holds
    no platform."""
    from hybridfuzz.strategies.platform import Platform

    with open(platform_file) as f:
        text = f.read()
    try:
        platform = Platform.from_json(text)
        vllm_facts.adopt(platform.vllm_facts)
    except (ValueError, TypeError, AttributeError) as e:  # not JSON, not an object, fields missing or unknown
        raise ValueError(f"{platform_file}: not a platform written by campaign ({type(e).__name__}: {e})") from None
    return platform


def run_worker(campaign_dir: str, index: int, until: float, seed: int, settings: WorkerSettings, platform=None,
               platform_from: str = "", tensor_parallel: int = 0) -> int:
    """One FuzzLoop until ``until`` (epoch seconds) or SIGTERM; its own out dir, the campaign's shared state.
    ``platform``: the supervisor's (read from ``platform_from``); None: detected here. ``tensor_parallel``: the one
    tensor-parallel size its cases draw, on the GPUs the supervisor pinned it to (campaign/placement.py); 0: the
    platform's choices.

    Its fork server is launched first, so that the server's import of torch and vLLM overlaps whatever the worker
    does before its first session: on the H200 of 2026-12-02 (results/2026-12-02-h200-vllm0.32.0-48-cases-per-engine/) twelve workers, each
    importing vLLM to detect the platform before launching its server, took 63-81 s to get that far."""
    from hybridfuzz.campaign.loop import FuzzLoop  # imports Hypothesis: not at the supervisor's import of this module

    out = os.path.join(campaign_dir, "workers", str(index))
    findings = os.path.join(campaign_dir, "findings")
    os.makedirs(out, exist_ok=True)
    os.makedirs(findings, exist_ok=True)
    name = worker_name(campaign_dir, index)
    store = make_store(campaign_dir, settings.redis_url)
    claims = make_claims(campaign_dir, name, store, settings.redis_url, settings.stale_after_s)
    database = KeepOthersDatabase(make_database(campaign_dir, settings.redis_url))

    def claim(sig: str) -> bool:
        ok = claims.claim(sig)
        database.keep = not ok and sig not in claims.done
        return ok

    session_start = time.time()
    with open(os.path.join(out, "sessions.jsonl"), "a") as f:
        f.write(json.dumps({"start": session_start, "pid": os.getpid(), "host": HOST, "worker": name}) + "\n")
    claims.heartbeat()
    state = {"worker": name, "index": index, "pid": os.getpid(), "host": HOST, "session_start": session_start, "engine_slots": settings.engines,
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
            loop_box[0].stop()

    def progress(stats, phase) -> None:
        database.keep = False  # called for each example before the claim hook
        state["phase"] = phase
        state["cases"] = stats.cases
        state["findings"] = len(stats.findings)
        if stats.first_finding_s is not None and state["first_finding_at"] is None:
            state["first_finding_at"] = stats.started + stats.first_finding_s

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    write_state()
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        with make_host("forkserver", workers=settings.engines, timeout=settings.timeout_s) as host:
            if platform is None:
                from hybridfuzz.strategies import detect_platform

                platform = detect_platform()
            platform = settings.narrowing.apply(platform)
            if tensor_parallel:
                platform = pinned(platform, tensor_parallel)
            print(f"worker {name}: pid {os.getpid()}, engine {platform.device}, {until - time.time():.0f}s left, seed {seed}, "
                  f"platform {'from ' + platform_from if platform_from else 'detected here'}", flush=True)
            use = settings.use.resolved(platform.device)
            cfg = FuzzConfig(cases_per_engine=use.cases_per_engine, shrink=use.shrink, shrink_parallel=use.shrink_parallel,
                             engine_slots=settings.engines, budget_s=max(0.0, until - time.time()), out_dir=out, findings_dir=findings, seed=seed,
                             timeout_s=settings.timeout_s, known_dirs=settings.known_dirs, database=database,
                             max_layers=settings.max_layers, max_steps=use.max_steps, claim=claim, taken=claims.taken_elsewhere,
                             known_fn=lambda: done_signatures(store, *settings.known_dirs, on=device_kind(platform.device)),
                             on_state=lambda sig, st, path, case: store.set(sig, st, path, case),
                             memory_dir=os.path.join(campaign_dir, "outcomes"), ledger=ledger_of(settings.known_dirs),
                             shrink_slots=ShrinkSlots(os.path.join(campaign_dir, "shrink-slots"), settings.shrink_slots)
                             if settings.shrink_slots else None)
            loop = FuzzLoop(cfg, host, platform, progress)
            loop_box.append(loop)
            if state["phase"] == "stopping":
                loop.stop()
            state["phase"] = "generate"
            loop.run()
    finally:
        stop.set()
        claims.sweep()
        state["phase"] = "exited"
        write_state()
    return 0  # what it found is in DIR/findings; a crash exits non-zero and the campaign restarts the worker
