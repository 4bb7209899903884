"""``hybridfuzz shrink``: make a failing YAML case minimal on the installed vLLM."""
from __future__ import annotations

import os
import sys


def _output_path(args) -> str:
    if args.in_place:
        return args.case
    if args.out:
        return args.out
    stem = args.case[:-5] if args.case.endswith(".yaml") else args.case
    return stem + ".min.yaml"


def cmd_shrink(args) -> int:
    from hybridfuzz.case import dump_case, load_case_file
    from hybridfuzz.cli_fuzz import parse_duration
    from hybridfuzz.executor import evaluate, needs_reference
    from hybridfuzz.findings import observation_of, with_observation
    from hybridfuzz.hosts import make_host
    from hybridfuzz.reduce import describe, shrink
    from hybridfuzz.store import write_atomic

    case = load_case_file(args.case)
    try:
        budget = parse_duration(args.budget)
    except ValueError as e:
        print(f"hybridfuzz: {e}", file=sys.stderr)
        return 2
    if case.kind == "component":
        print("hybridfuzz: shrink: component cases are shrunk by `hybridfuzz check-components`", file=sys.stderr)
        return 2
    out = _output_path(args)
    with make_host("forkserver", workers=args.workers, timeout=args.timeout, warm=False) as host:
        first = evaluate(case, host, args.timeout)
        target = args.signature or first.verdict.signature
        print(f"{args.case}: {first.verdict.one_line()}")
        if first.verdict.signature != target or not target:
            print(f"hybridfuzz: shrink: the case does not fail here with {target or 'a divergence'} "
                  f"(this run: {first.verdict.status} {first.verdict.signature}); nothing to shrink", file=sys.stderr)
            return 1

        env = first.trace.env
        per_case = 2 if needs_reference(case) else 1
        parallel = max(1, args.workers // per_case)
        print(f"shrinking {describe(case)} toward {target}: {parallel} variant(s) at a time, budget {budget:.0f}s -> {out}")
        result = shrink(case, target, host, budget, parallel, args.timeout,
                        on_smaller=lambda c, v, why: write_atomic(out, dump_case(with_observation(c, observation_of(v, env)))))
        confirm = evaluate(result.case, host, args.timeout)
    same = confirm.verdict.signature == target
    note = (f"shrunk by `hybridfuzz shrink` ({len(result.accepted)} simplifications, {result.runs} engine runs, "
            f"{result.seconds:.0f}s{'' if result.finished else ', budget ended'}); replayed on a fresh engine: "
            f"{'same signature' if same else confirm.verdict.status + ' ' + confirm.verdict.signature}.")
    final = with_observation(result.case, observation_of(confirm.verdict if same else result.verdict, confirm.trace.env))
    earlier = final.note.rstrip()
    if earlier and not earlier.endswith("."):
        earlier += "."
    final = final.replace(note=(earlier + " " if earlier else "") + note)
    write_atomic(out, dump_case(final))
    print(f"{'minimal' if result.finished else 'smaller (budget ended)'}: {describe(result.case)} after "
          f"{len(result.accepted)} simplifications, {result.runs} engine runs, {result.seconds:.0f}s")
    print(f"replayed on a fresh engine: {confirm.verdict.one_line()}")
    print(f"written: {os.path.relpath(out)}")
    return 0 if same else 1


def register(sub) -> None:
    s = sub.add_parser("shrink", help="shrink a failing YAML case to a minimal one with the same signature (exit 0 when written)")
    s.add_argument("case")
    s.add_argument("--out", help="where the minimal case goes (default CASE.min.yaml; written after every step)")
    s.add_argument("--in-place", action="store_true", help="overwrite CASE itself (atomically, after every step)")
    s.add_argument("--signature", help="the failure to keep (default: the one this run of CASE shows)")
    s.add_argument("--budget", default="30m", help="wall-clock budget, e.g. 90s, 20m")
    s.add_argument("--workers", type=int, default=2, help="engines at once (variants run in parallel)")
    s.add_argument("--timeout", type=float, default=300.0, help="seconds per engine run before it counts as a hang")
    s.set_defaults(func=cmd_shrink)
