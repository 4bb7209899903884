"""Statistics of a campaign directory, live or finished (``campaign-status``, DIR/summary.json).

Cases and busy time come from the append-only events (``records.iter_events``), so they
survive ``kill -9``; findings and their states from the finding store (every host with --redis).
"""
from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from statistics import median

from hybridfuzz.campaign.records import CaseEvent, FindingState, dimension_counts, iter_events
from hybridfuzz.campaign.state import FindingStore
from hybridfuzz.vllm_facts import PIN_OVERRIDES_ENV, vllm_version


def _json_or_empty(path: str) -> dict:
    """A worker's JSON file, or {} while it is not written yet (or cut by kill -9)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


CPU_KEYS = ("engine_cpu_s", "startup_cpu_s", "worker_cpu_s")  # a worker's RunSummary (campaign/counting.py throughput)


def cpu_use(workers: dict[str, dict], meta: dict, spent_s: float) -> dict:
    """Where the host's CPU went, in core-seconds: the workers' engines (their start-ups apart), the workers
    themselves, and the whole host while the campaign ran (meta's host_cpu, campaign/supervisor.py); the rest of
    the host's busy time is the background shrinks' engines and anything else on it. A worker's figures arrive with
    its summary, at its end."""
    total = {k: round(sum(w.get(k, 0.0) for w in workers.values()), 1) for k in CPU_KEYS}
    host = meta.get("host_cpu") or {}
    if host.get("busy_cores") is not None and spent_s > 0:
        total["host_busy_cores"] = host["busy_cores"]
        total["host_cores"] = host.get("cores")
    return total


def host_lost_line(lost: int, workers: int) -> str:
    """What a run says when workers stopped because their engines saw no device ("" when none did)."""
    if not lost:
        return ""
    return (f"host lost: {lost} of {workers} worker(s) stopped early, their engines seeing no device (refused cases "
            f"by reason above); the cases after that point were not run")


def worker_stats(wdir: str, events: list[CaseEvent]) -> dict:
    """Cases, busy time and sessions of one worker (a session restarts t at 0)."""
    busy, sessions, last_t, phase, shrink_cases = 0.0, 0, None, None, 0
    for e in events:
        if last_t is None or e.t < last_t:
            sessions += 1
            if last_t is not None:
                busy += last_t
        last_t = e.t
        phase = e.phase
        shrink_cases += e.phase == "shrink"
    busy += last_t or 0.0
    starts = 0
    try:
        with open(os.path.join(wdir, "sessions.jsonl"), encoding="utf-8") as f:
            starts = sum(1 for _ in f)
    except OSError:
        pass
    state = _json_or_empty(os.path.join(wdir, "state.json"))
    summary = _json_or_empty(os.path.join(wdir, "summary.json"))
    return {"cases": len(events), "steps": sum(len(e.steps) for e in events), "shrink_cases": shrink_cases,
            "engine_starts": summary.get("engine_starts", 0), "engine_busy_s": summary.get("engine_busy_s", 0.0),
            "sessions_s": summary.get("sessions_s", 0.0), "confirm_s": summary.get("confirm_s", 0.0),
            "engine_slots": state.get("engine_slots", 0), "refusals": summary.get("refusals", {}),
            "refusals_predicted": summary.get("refusals_predicted", 0), "known_avoided": summary.get("known_avoided", 0),
            "sleep_checks_finished": summary.get("sleep_checks_finished", 0), "engine_ends": summary.get("engine_ends", {}),
            "noise_set_aside": summary.get("noise_set_aside", {}), "left_unconfirmed": summary.get("left_unconfirmed", 0),
            "histories_deferred": summary.get("histories_deferred", 0), "host_lost": summary.get("host_lost", False),
            "busy_s": round(busy, 1), "starts": starts,
            **{k: summary.get(k, 0.0) for k in CPU_KEYS},
            "last_phase": phase, "state": state}


def space_and_pace(events: list[CaseEvent]) -> dict:
    """What was drawn (families, graph modes, model memory) and what it cost; the rate once the first case ended
    (a fresh GPU host spends its first minutes in Triton JIT, which no setting avoids)."""

    families: dict[str, int] = defaultdict(int)
    graphs: dict[str, int] = defaultdict(int)
    memories: dict[str, int] = defaultdict(int)
    session_s: dict[str, list[float]] = defaultdict(list)
    for e in events:
        families[e.family or "?"] += 1
        graphs[e.graphs or "?"] += 1
        memories[e.memory or "?"] += 1
        if e.session_s:
            session_s[e.graphs or "?"].append(e.session_s)
    starts = [e.startup_s for e in events if e.startup_s]
    start_cpu = [e.startup_cpu_s for e in events if e.startup_s and e.startup_cpu_s]
    warm_cpu = [e.cpu_s for e in events if not e.startup_s and e.cpu_s]  # a case on a warm engine, prelude included
    walls = sorted(e.wall for e in events if e.wall)
    warm = round((len(walls) - 1) / ((walls[-1] - walls[0]) / 60), 1) if len(walls) > 2 and walls[-1] > walls[0] else None
    return {"families": dict(sorted(families.items(), key=lambda kv: -kv[1])), "graphs": dict(graphs),
            "memory": dict(memories),
            "dimensions": dimension_counts(events),
            "new_dimension_cases": sum(1 for e in events if e.dimensions),
            "median_session_s": {k: round(median(v), 1) for k, v in session_s.items()},
            "median_case_s": {k: round(median(e.seconds for e in events if (e.graphs or "?") == k), 1) for k in graphs},
            "cases_per_min_after_first": warm, "median_startup_s": round(median(starts), 1) if starts else None,
            "median_startup_cpu_s": round(median(start_cpu), 2) if start_cpu else None,
            "median_warm_case_cpu_s": round(median(warm_cpu), 3) if warm_cpu else None,
            "steps_s_total": round(sum(e.steps_s for e in events), 1)}


def findings_list(store: FindingStore) -> list[dict]:
    return [{"signature": r.signature, "path": r.path, "host": r.host, "summary": r.summary, "state": r.state.value, "size": r.size}
            for r in sorted(store.all().values(), key=lambda r: r.signature)]


def load_meta(campaign_dir: str) -> dict:
    try:
        with open(os.path.join(campaign_dir, "campaign.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _summed(workers: dict[str, dict], key: str) -> Counter:
    """One per-worker counter (reason -> n) summed over the workers."""
    total: Counter = Counter()
    for w in workers.values():
        total.update(w[key])
    return total


def aggregate(campaign_dir: str, meta: dict | None = None, store: FindingStore | None = None) -> dict:
    meta = meta if meta is not None else load_meta(campaign_dir)
    store = store or FindingStore(campaign_dir)
    by_worker: dict[str, list[CaseEvent]] = defaultdict(list)
    every: list[CaseEvent] = []
    for e in iter_events(campaign_dir):
        by_worker[e.worker].append(e)
        every.append(e)
    wroot = os.path.join(campaign_dir, "workers")
    names = set(by_worker) | {n for n in (os.listdir(wroot) if os.path.isdir(wroot) else ()) if os.path.isdir(os.path.join(wroot, n))}
    names.discard("")
    workers = {n: worker_stats(os.path.join(wroot, n), by_worker.get(n, []))
               for n in sorted(names, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))}
    cases = sum(w["cases"] for w in workers.values())
    spent = float(meta.get("spent_s", 0.0))
    found = meta.get("seen", {})
    first_found = [v["found_s"] for v in found.values() if v.get("found_s") is not None]
    first_reported = [v["reported_s"] for v in found.values() if v.get("reported_s") is not None]
    fl = findings_list(store)
    steps = sum(w["steps"] for w in workers.values())
    starts = sum(w["engine_starts"] for w in workers.values())
    slots = sum(w["engine_slots"] for w in workers.values())
    refusals, ends, noise = _summed(workers, "refusals"), _summed(workers, "engine_ends"), _summed(workers, "noise_set_aside")
    per_min = (lambda n: round(n / (spent / 60), 1) if spent > 0 else None)
    return {
        "dir": os.path.abspath(campaign_dir), "budget_s": meta.get("budget_s"), "spent_s": round(spent, 1),
        "runs": meta.get("runs", 0), "workers": len(workers), "cases": cases,
        "cases_per_min": round(cases / (spent / 60), 2) if spent > 0 else None,
        "worker_busy_s": round(sum(w["busy_s"] for w in workers.values()), 1),
        # of the workers' wall time: waiting on sessions, confirming on fresh engines (the rest: drawing, judging, tails)
        "worker_in_sessions_fraction": round(sum(w["sessions_s"] for w in workers.values()) / (spent * len(workers)), 3) if spent > 0 and workers else None,
        "worker_confirming_fraction": round(sum(w["confirm_s"] for w in workers.values()) / (spent * len(workers)), 3) if spent > 0 and workers else None,
        "steps": steps, "steps_per_min": per_min(steps), "engine_starts": starts, "engine_starts_per_min": per_min(starts),
        "engine_busy_fraction": round(sum(w["engine_busy_s"] for w in workers.values()) / (spent * slots), 3) if spent > 0 and slots else None,
        "refusals": dict(refusals.most_common(10)),
        "refusals_predicted": sum(w["refusals_predicted"] for w in workers.values()),
        "workers_host_lost": sum(bool(w["host_lost"]) for w in workers.values()),  # stopped: their engines saw no device
        "known_avoided": sum(w["known_avoided"] for w in workers.values()),
        "sleep_checks_finished": sum(w["sleep_checks_finished"] for w in workers.values()),
        "engine_ends": dict(ends.most_common()),
        "noise_set_aside": dict(noise.most_common()),
        "left_unconfirmed": sum(w["left_unconfirmed"] for w in workers.values()),
        "histories_deferred": sum(w["histories_deferred"] for w in workers.values()),
        "cpu": cpu_use(workers, meta, spent),
        "findings": sum(1 for f in fl if f["state"] == FindingState.REPLAYED.value),
        "findings_open": sum(1 for f in fl if f["state"] == FindingState.OPEN.value),
        "flaky": sum(1 for f in fl if f["state"] == FindingState.FLAKY.value),
        "known_class": sum(1 for f in fl if f["state"] == FindingState.KNOWN_CLASS.value),
        "time_to_first_finding_s": min(first_found) if first_found else None,
        "time_to_first_report_s": min(first_reported) if first_reported else None,
        "database": meta.get("database"), "engine": meta.get("engine"), "seed": meta.get("seed"),
        "fault_injected": os.environ.get("HYBRIDFUZZ_FAULT", ""),
        "vllm": vllm_version(), "pin_overrides": os.environ.get(PIN_OVERRIDES_ENV, ""),
        "restarts": sum(max(0, w["starts"] - 1) for w in workers.values()),
        **space_and_pace(every),
        "finding_list": fl, "seen": found, "per_worker": workers,
    }
