"""``hybridfuzz campaign``: a long campaign of several workers sharing one example database
and one findings directory; resumable (run it again with the same --dir). On a terminal the
status is a live per-worker table (rich); otherwise one line per tick."""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import FOUND, INTERRUPTED, OK, UNSUPPORTED, UsageError

NAME = "campaign"
HELP = "a long, resumable campaign of several workers sharing examples and findings (exit 1 when findings exist)"
EXITS = {0: "no findings", 1: "findings reported", 3: "--engine gpu with no GPU visible"}


def dimensions_line(s: dict) -> str:
    """The new search dimensions' counts (docs/dimensions.md): how many cases used each, and used any."""
    share = s["new_dimension_cases"] / s["cases"] if s["cases"] else 0.0
    pins = f" with {s['pin_overrides']} in place of its own pins" if s.get("pin_overrides") else ""
    return (f"vLLM {s.get('vllm', '?')}{pins}; new dimensions: {s['new_dimension_cases']} of {s['cases']} cases ({share:.0%}) "
            f"used one or more; per dimension {s['dimensions'] or 'none'}")


def add_worker_options(p) -> None:
    """Options a campaign passes on to each worker (campaign/config.WorkerSettings)."""
    p.add_argument("--dir", required=True, help="campaign directory (resumable: run again with the same one)")
    p.add_argument("--redis", help="share examples, claims and findings through Redis, e.g. redis://127.0.0.1:6379/0 (needs .[redis])")
    p.add_argument("--engines", type=options.count, default=0, help="engines per worker (default: cores/workers on CPU; on GPU 2, a session and its reference)")
    options.add_timeout(p)
    options.add_known(p)
    p.add_argument("--stale-after", type=options.seconds, default=120.0, help="seconds without heartbeat before a claim may be taken over")
    options.add_case_limits(p)
    options.add_narrowing(p)
    options.add_engine_use(p)
    p.add_argument("--shrink-slots", type=options.count, default=0,
                   help="background shrinks at once on this host, all workers together (default on GPU: from the plan line printed at start)")


def settings_of(args):
    """The settings as given; a worker gets its known set spelled out (``campaign`` resolves the default)."""
    from hybridfuzz.campaign.config import WorkerSettings

    return WorkerSettings(redis_url=args.redis, engines=args.engines, timeout_s=args.timeout, known_dirs=tuple(args.known or ()),
                          stale_after_s=args.stale_after, max_layers=args.max_layers,
                          narrowing=options.narrowing_of(args), use=options.engine_use_of(args), shrink_slots=args.shrink_slots)


def add_arguments(p) -> None:
    add_worker_options(p)
    options.add_budget(p, "2h", "total wall-clock budget over all runs of this --dir")
    p.add_argument("--workers", type=options.count, default=0, help="workers (default on GPU: from free GPU memory and cores, see the plan line printed at start; on CPU one per 2 cores)")
    p.add_argument("--engine", default="cpu", choices=["cpu", "gpu"], help="gpu: workers spread over the visible GPUs (worker i gets CUDA_VISIBLE_DEVICES=i mod GPUs)")
    p.add_argument("--seed", type=int, default=0, help="worker i runs seed*100+i")
    p.add_argument("--status-every", type=options.seconds, default=30.0, help="seconds between status updates")
    options.add_json(p)


def _seconds(value) -> str:
    return "none" if value is None else f"{value}s"


def _rate(value) -> str:
    return "n/a" if value is None else f"{value}/min"


def check_redis(url: str) -> None:
    from hybridfuzz.campaign.database import redis_client

    try:
        redis_client(url)
    except ImportError:
        raise UsageError("--redis needs the redis package: pip install -e .[redis]") from None
    except Exception as e:  # redis.ConnectionError, a bad URL (ValueError), ...
        raise UsageError(f"--redis {url}: {type(e).__name__}: {e}") from None


def live_table():
    """(on_status, close) drawing a per-worker table with rich when stderr is a terminal; else (None, no-op)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    live = Live(console=Console(stderr=True), auto_refresh=False)
    live.start()

    def on_status(summary: dict, phases: dict[str, str]) -> None:
        t = Table(title=f"{summary['dir']}: {summary['spent_s']:.0f}s, {summary['cases']} cases "
                        f"({summary['cases_per_min'] or 0}/min), findings {summary['findings']} reported, {summary['findings_open']} open")
        for col in ("worker", "phase", "cases", "shrinking", "starts"):
            t.add_column(col, justify="right" if col not in ("worker", "phase") else "left")
        for i, w in summary["per_worker"].items():
            t.add_row(i, phases.get(i, "-"), str(w["cases"]), str(w["shrink_cases"]), str(w["starts"]))
        live.update(t, refresh=True)

    return on_status, live.stop


def run(args) -> int:
    from hybridfuzz.campaign.supervisor import CampaignSupervisor
    from hybridfuzz.campaign.stats import host_lost_line
    from hybridfuzz.strategies import detect_platform

    options.dir_to_write("--dir", args.dir)
    known = options.known_dirs(args.known)
    platform = None
    if args.kv_dtypes or args.attention_backends:
        platform = detect_platform()
        options.narrow_platform(platform, args)  # one clear line now, not a failure in every worker
    if args.redis:
        check_redis(args.redis)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        supervisor = CampaignSupervisor(args.dir, args.budget, workers=args.workers, engine=args.engine, seed=args.seed,
                                        settings=dataclasses.replace(settings_of(args), known_dirs=known), status_every_s=args.status_every, log=say,
                                        platform=platform)
    except RuntimeError as e:  # --engine gpu and no GPU
        raise UsageError(str(e), UNSUPPORTED) from None
    on_status, close = live_table()
    supervisor.on_status = on_status
    try:
        s = supervisor.run()  # Ctrl-C and SIGTERM stop the workers in order and end the run early
    finally:
        close()
    if args.json:
        print(json.dumps(s, indent=2))
    say(f"{'interrupted' if s['interrupted'] else 'done'}: {s['cases']} cases in {s['spent_s']}s over {s['runs']} run(s) "
        f"({s['cases_per_min']}/min, {_rate(s['cases_per_min_after_first'])} after the first case); {s['findings']} findings reported, {s['findings_open']} still open, {s['flaky']} flaky, "
        f"{s['known_class']} of known KV-dtype classes; "
        f"first finding at {_seconds(s['time_to_first_finding_s'])}, first report at {_seconds(s['time_to_first_report_s'])}; "
        f"worker restarts {s['restarts']}")
    say(f"throughput: {s['steps_per_min']} steps/min, {s['engine_starts_per_min']} engine starts/min, engines busy "
        f"{s['engine_busy_fraction']}, warm engines given up by why: {s['engine_ends'] or 'none'}, "
        f"cases passed as noise by control: {s['noise_set_aside'] or 'none'}, workers waiting on sessions {s['worker_in_sessions_fraction']} and confirming "
        f"{s['worker_confirming_fraction']} of their time ({s['histories_deferred']} warm histories handed to the background "
        f"shrinker to confirm, {s['left_unconfirmed']} warm divergences after the budget left open, unconfirmed); refused cases by reason: {s['refusals'] or 'none'}, "
        f"{s['refusals_predicted']} more foreseen refused; {s['known_avoided']} cases left out (a known bug foreseen)")
    say(f"drawn: families {s['families']}, graphs {s['graphs']}; median session s {s['median_session_s']}, median case s {s['median_case_s']}, "
        f"median engine start-up {_seconds(s['median_startup_s'])}, seconds in steps {s['steps_s_total']}")
    say(dimensions_line(s))
    for f in s["finding_list"]:
        say(f"  [{f['state']}] {f['signature']}: {f['path']}\n    {f['summary']}")
    if s.get("shared_features", {}).get("found"):
        from hybridfuzz.triage import shared_features

        for line in shared_features.lines(s["shared_features"]):
            say(line)
    if lost := host_lost_line(s["workers_host_lost"], s["workers"]):
        say(lost)
    say(f"summary: {os.path.join(args.dir, 'summary.json')}")
    if s["interrupted"]:
        return INTERRUPTED
    return FOUND if s["findings"] else OK
