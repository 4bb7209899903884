"""``hybridfuzz check-components``: engine-free KV-cache properties through Hypothesis; each
shrunk failure is written as a ``kind: component`` case (replay it with ``hybridfuzz replay``)."""
from __future__ import annotations

import os
import time

from hybridfuzz.cli import options
from hybridfuzz.components.search import PROPERTIES

NAME = "check-components"
HELP = "engine-free KV-cache properties via Hypothesis; failures become component cases"
EXITS = {0: "every property holds (or is unsupported here)", 1: "a property failed (shrunk case written)"}


def add_arguments(p) -> None:
    p.add_argument("--examples", type=options.positive_int, default=100, help="Hypothesis examples per property")
    p.add_argument("--property", action="append", choices=list(PROPERTIES), help="repeatable; default all")
    p.add_argument("--out", default=os.path.join("corpus", "found"), help="where shrunk failing cases are written")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: derandomized)")
    p.add_argument("--evidence", type=options.count, default=6, help="evidence lines to print per failure")


def run(args) -> int:
    from hybridfuzz.components.search import search, write_found

    options.dir_to_write("--out", args.out)
    props = args.property or list(PROPERTIES)
    failed = 0
    for prop in props:
        t0 = time.perf_counter()
        res = search(prop, examples=args.examples, seed=args.seed)
        dt = time.perf_counter() - t0
        if res.verdict is None:
            state = f"UNSUPPORTED ({res.unsupported})" if res.unsupported else "PASS"
            print(f"{prop}: {state} after {res.examples} examples in {dt:.1f}s")
            continue
        failed += 1
        path = write_found(res, args.out)
        print(f"{prop}: {res.verdict.one_line()}  [{res.examples} examples, {dt:.1f}s]")
        for line in res.verdict.evidence[: args.evidence]:
            print("  " + line)
        print(f"  shrunk case: {path}")
    return 1 if failed else 0
