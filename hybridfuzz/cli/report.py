"""``hybridfuzz report DIR``: a self-contained HTML page for a fuzz or campaign directory."""
from __future__ import annotations

import os

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "report"
HELP = "an HTML page with plots for a fuzz or campaign directory"
EXITS = {0: "written (its path on stdout)"}


def add_arguments(p) -> None:
    p.add_argument("dir", help="a directory written by `hybridfuzz fuzz --out` or `hybridfuzz campaign --dir`")
    p.add_argument("--out", help="default: DIR/report.html")
    p.add_argument("--redis", help="a campaign run with --redis: also show the findings other hosts shared there")


def run(args) -> int:
    from hybridfuzz.report import page

    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: {'not a directory' if os.path.exists(args.dir) else 'no such directory'}")
    out = args.out or os.path.join(args.dir, "report.html")
    options.file_to_write("--out", out)
    client = None
    if args.redis:
        from hybridfuzz.campaign.database import redis_client
        from hybridfuzz.cli.campaign import check_redis

        check_redis(args.redis)
        client = redis_client(args.redis)
    run_ = page.load_run(args.dir, client)
    if not run_.events and not run_.summary:
        raise UsageError(f"{args.dir}: not a fuzz or campaign directory (no summary.json, no events.jsonl)")
    html = page.render(run_)
    from hybridfuzz.store import write_atomic

    write_atomic(out, html)
    print(out)
    return 0
