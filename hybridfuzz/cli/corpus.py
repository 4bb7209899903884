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
    from hybridfuzz.triage import status

    dirs = args.dirs or ["corpus"]
    for d in dirs:
        if not os.path.exists(d):
            raise UsageError(f"{d}: no such file or directory")
    groups, clean = status.group(status.load_entries(dirs))
    print(status.render_json(groups, clean) if args.json else status.render_text(groups, clean))
    return 0
