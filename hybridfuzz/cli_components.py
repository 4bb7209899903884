"""``hybridfuzz check-components`` and ``hybridfuzz atheris``: engine-free KV-cache properties.

check-components runs the three component properties through Hypothesis and writes
each shrunk failure as a ``kind: component`` case (replay it with ``hybridfuzz replay``).
atheris runs one of the coverage-guided harnesses in fuzz/ with a libFuzzer corpus dir.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")


def cmd_check_components(args) -> int:
    from hybridfuzz.components.search import PROPERTIES, search, write_found

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


def cmd_atheris(args) -> int:
    script = os.path.join(FUZZ_DIR, f"atheris_{args.harness}.py")
    if not os.path.exists(script):
        print(f"hybridfuzz: no harness {script}", file=sys.stderr)
        return 2
    argv = [sys.executable, script]
    if args.harness == "components":
        argv += ["--property", args.property, "--out", args.out]
    extra = args.libfuzzer if args.libfuzzer is not None else ("-max_len=4096 -len_control=0" if args.harness == "components" else "-max_len=512")
    argv += [f"-atheris_runs={args.runs}", *extra.split()]
    if args.corpus:
        os.makedirs(args.corpus, exist_ok=True)
        argv.append(args.corpus)
    return subprocess.call(argv)


def register(sub) -> None:
    c = sub.add_parser("check-components", help="engine-free KV-cache properties via Hypothesis; failures become component cases")
    c.add_argument("--examples", type=int, default=100, help="Hypothesis examples per property")
    c.add_argument("--property", action="append", choices=["scale_view_fill", "wake_kv_reinit", "kv_layout"], help="repeatable; default all")
    c.add_argument("--out", default=os.path.join("corpus", "found"), help="where shrunk failing cases are written")
    c.add_argument("--seed", type=int, default=None, help="random seed (default: derandomized)")
    c.add_argument("--evidence", type=int, default=6, help="evidence lines to print per failure")
    c.set_defaults(func=cmd_check_components)

    a = sub.add_parser("atheris", help="coverage-guided fuzzing (atheris/libFuzzer) of the case loader or the component properties")
    a.add_argument("harness", choices=["loader", "components"])
    a.add_argument("--runs", type=int, default=10000)
    a.add_argument("--corpus", default=None, help="libFuzzer corpus directory (created; seeded with corpus/*.yaml for the loader)")
    a.add_argument("--property", default="kv_layout", choices=["scale_view_fill", "wake_kv_reinit", "kv_layout"])
    a.add_argument("--out", default=os.path.join("corpus", "found"))
    a.add_argument("--libfuzzer", default=None, help="extra libFuzzer flags in one string (default: components '-max_len=4096 -len_control=0', loader '-max_len=512')")
    a.set_defaults(func=cmd_atheris)
