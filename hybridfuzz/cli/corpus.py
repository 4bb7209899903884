"""``hybridfuzz corpus [DIR...]``: findings grouped by signature, status per vLLM version."""
from __future__ import annotations

import os

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "corpus"
HELP = "list findings grouped by signature with their status per vLLM version"
EXITS = {0: "listed"}


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="*", help="directories or case files (default: corpus)")
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz import triage

    dirs = args.dirs or ["corpus"]
    for d in dirs:
        if not os.path.exists(d):
            raise UsageError(f"{d}: no such file or directory")
    groups, clean = triage.group(triage.load_entries(dirs))
    print(triage.render_json(groups, clean) if args.json else triage.render_text(groups, clean))
    return 0
