"""``hybridfuzz campaign``: a long campaign of several workers sharing one example
database and one findings directory; resumable (run it again with the same --dir).
``hybridfuzz campaign-worker`` is one of its workers (started by the campaign)."""
from __future__ import annotations

import json
import os
import sys


def cmd_campaign(args) -> int:
    from rich.console import Console

    from hybridfuzz.campaign import Campaign
    from hybridfuzz.cli_fuzz import narrow_platform, parse_duration
    from hybridfuzz.strategies import detect_platform

    try:
        budget = parse_duration(args.budget)
        if args.kv_dtypes or args.attention_backends:
            narrow_platform(detect_platform(), args)  # one clear line now, not a failure in every worker
    except ValueError as e:
        print(f"hybridfuzz: {e}", file=sys.stderr)
        return 2
    console = Console(stderr=True)
    if args.redis:
        try:
            from hybridfuzz.campaign import redis_client

            redis_client(args.redis)
        except ImportError:
            print("hybridfuzz: --redis needs the redis package: pip install -e .[redis]", file=sys.stderr)
            return 2
        except Exception as e:
            print(f"hybridfuzz: --redis {args.redis}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    try:
        campaign = Campaign(args.dir, budget, workers=args.workers, redis_url=args.redis, engine=args.engine, seed=args.seed,
                            engines=args.engines, timeout_s=args.timeout, known_dirs=tuple(args.known or ()),
                            status_every_s=args.status_every, stale_after_s=args.stale_after,
                            max_layers=args.max_layers, max_steps=args.max_steps, narrowing=_narrowing(args),
                            log=lambda line: console.print(line, highlight=False, soft_wrap=True))
    except RuntimeError as e:
        print(f"hybridfuzz: {e}", file=sys.stderr)
        return 3
    s = campaign.run()
    console.print(f"done: {s['cases']} cases in {s['spent_s']}s over {s['runs']} run(s) ({s['cases_per_min']}/min); "
                  f"{s['findings']} findings reported, {s['findings_open']} still open, {s['flaky']} flaky; "
                  f"first finding at {s['time_to_first_finding_s']}s, first report at {s['time_to_first_report_s']}s; "
                  f"worker restarts {s['restarts']}")
    for f in s["finding_list"]:
        console.print(f"  [{f['state']}] {f['signature']}: {f['path']}\n    {f['summary']}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"summary: {os.path.join(args.dir, 'summary.json')}")
    return 1 if s["findings"] else 0


def cmd_campaign_worker(args) -> int:
    from hybridfuzz.campaign import run_worker

    return run_worker(args.dir, args.index, args.until, seed=args.seed, redis_url=args.redis, engines=args.engines,
                      timeout_s=args.timeout, known_dirs=tuple(args.known or ()), stale_after_s=args.stale_after,
                      max_layers=args.max_layers, max_steps=args.max_steps, narrowing=_narrowing(args))


def _narrowing(args) -> dict:
    return {"kv_dtypes": args.kv_dtypes, "attention_backends": args.attention_backends, "eager_only": args.eager_only}


def cmd_campaign_status(args) -> int:
    from hybridfuzz.campaign import aggregate

    s = aggregate(args.dir)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{s['dir']}: {s['cases']} cases in {s['spent_s']}s ({s['cases_per_min']}/min), {s['findings']} reported, "
          f"{s['findings_open']} open, restarts {s['restarts']}")
    for i, w in s["per_worker"].items():
        print(f"  worker {i}: {w['cases']} cases ({w['shrink_cases']} shrinking), {w['starts']} start(s), last phase {w['last_phase']}")
    for f in s["finding_list"]:
        print(f"  [{f['state']}] {f['signature']}: {f['path']}")
    return 0


def _common(p) -> None:
    p.add_argument("--dir", required=True, help="campaign directory (resumable: run again with the same one)")
    p.add_argument("--redis", help="share examples and claims through Redis, e.g. redis://127.0.0.1:6379/0 (needs .[redis])")
    p.add_argument("--engines", type=int, default=0, help="engines per worker (default: cores/workers on CPU, 4 per GPU)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per engine run before it counts as a hang")
    p.add_argument("--known", action="append", help="directory of cases whose signatures are already known (repeatable)")
    p.add_argument("--stale-after", type=float, default=120.0, help="seconds without heartbeat before a claim may be taken over")
    p.add_argument("--max-layers", type=int, default=8)
    p.add_argument("--max-steps", type=int, default=6)
    from hybridfuzz.cli_fuzz import add_narrowing

    add_narrowing(p)


def register(sub) -> None:
    c = sub.add_parser("campaign", help="a long, resumable campaign of several workers sharing examples and findings (exit 1 when findings exist)")
    _common(c)
    c.add_argument("--budget", default="2h", help="total wall-clock budget over all runs of this --dir, e.g. 90s, 20m, 2h")
    c.add_argument("--workers", type=int, default=0, help="workers (default: one per GPU; on CPU one per 2 cores)")
    c.add_argument("--engine", default="cpu", choices=["cpu", "gpu"], help="gpu: one worker per GPU (CUDA_VISIBLE_DEVICES=i)")
    c.add_argument("--seed", type=int, default=0, help="worker i runs seed*100+i")
    c.add_argument("--status-every", type=float, default=30.0, help="seconds between status lines")
    c.set_defaults(func=cmd_campaign)

    w = sub.add_parser("campaign-worker", help="one campaign worker (started by `hybridfuzz campaign`)")
    _common(w)
    w.add_argument("--index", type=int, required=True)
    w.add_argument("--until", type=float, required=True, help="stop at this time (seconds since the epoch)")
    w.add_argument("--seed", type=int, default=0)
    w.set_defaults(func=cmd_campaign_worker)

    s = sub.add_parser("campaign-status", help="aggregate statistics of a campaign directory (live or finished)")
    s.add_argument("--dir", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_campaign_status)
