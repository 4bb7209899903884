"""``hybridfuzz bugs``: the bug ledger, one entry per root cause, with its cases and upstream status."""
from __future__ import annotations

import os

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "bugs"
HELP = "list the bug ledger (corpus/bugs.yaml): each root cause once, its status, cases and verified reproducer runs"
EXITS = {0: "listed", 1: "--check: a finding in the corpus names no bug"}


def add_arguments(p) -> None:
    p.add_argument("--ledger", default=os.path.join("corpus", "bugs.yaml"), help="the ledger file (default: corpus/bugs.yaml)")
    p.add_argument("--corpus", default=None, help="the corpus whose cases name the bugs (default: the ledger's folder)")
    p.add_argument("--markdown", metavar="FILE", default=None, help="also write the ledger as Markdown (docs/bugs.md)")
    p.add_argument("--check", action="store_true", help="exit 1 when a finding in the corpus names no bug")
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz.report import bugs as page
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.ledger import load_ledger

    if not os.path.isfile(args.ledger):
        raise UsageError(f"--ledger: {args.ledger}: no such file")
    options.file_to_write("--markdown", args.markdown)
    ledger = load_ledger(args.ledger, args.corpus)
    print(page.render_json(ledger) if args.json else page.render_text(ledger))
    if args.markdown:
        write_atomic(args.markdown, page.render_markdown(ledger))
    return 1 if args.check and ledger.unassigned else 0
