"""``hybridfuzz isolate CASE.yaml``: which settings of a finding matter (its cause set)."""
from __future__ import annotations

import json
import sys
import time

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import FOUND, OK, UsageError
from hybridfuzz.engines.base import Host

NAME = "isolate"
HELP = "flip each setting of a (shrunk) finding to its neutral value on fresh engines and print which flips make it pass (its cause set)"
EXITS = {0: "every flip was decided (the cause set is printed; --write writes it)",
         1: "the case does not show its finding here, or the budget ended before every flip was decided"}


def add_arguments(p) -> None:
    p.add_argument("case", help="a YAML case file that records a divergence (kind: engine), best a shrunk one")
    options.add_host(p)
    options.add_budget(p, "30m", "wall-clock budget of the first runs and the flips together")
    p.add_argument("--workers", type=options.positive_int, default=2, help="engines at once (flips run in parallel)")
    p.add_argument("--tries", type=options.positive_int, default=None,
                   help="fresh runs a flip gets before it counts as passing (default: from the rate the case file records "
                        "for its finding on this machine, as `shrink` takes it; 1 for one seen every time)")
    p.add_argument("--write", action="store_true", help="write the cause set into the case file (cause:), atomically")
    options.add_timeout(p)
    options.add_json(p)


def _finding(path: str):
    """The case and the signatures it records for its finding (findings.recorded_signatures, newest first), or one
    line and exit 2."""
    from hybridfuzz.case import load_case_file
    from hybridfuzz.triage.findings import recorded_signatures

    case = load_case_file(path)
    if case.kind == "component":
        raise UsageError(f"isolate: {path}: a component case has no engine settings to flip")
    recorded = recorded_signatures(case)
    if not recorded:
        raise UsageError(f"isolate: {path}: records no divergence (observed:); `hybridfuzz replay {path} --record` records one")
    return case, recorded


def shows_finding(case, recorded: list[str], host: Host, timeout: float, budget_s: float, tries: int | None, say):
    """The case itself on fresh engines until it shows one of its ``recorded`` signatures, as many runs as their rates
    need: a case that does not fail here would make every flip look like a cause. (The run that showed one or None,
    the runs a flip gets, the runs made.) What it shows is the target: turboquant-k8v4-nan-cpu.yaml records its
    NaN here (AVX-512) and, newest, a SIGILL on an AMX CPU, which no run here shows."""
    from hybridfuzz.executor import replay
    from hybridfuzz.triage.isolate import tries_for

    t0, seen = time.monotonic(), []
    while True:
        result = replay(case, host, timeout)
        seen.append(result.verdict.signature)
        say(f"{'again: ' if len(seen) > 1 else ''}{result.verdict.one_line()}")
        most = tries or max(tries_for(case, signature, result.trace.env, seen) for signature in recorded)
        if result.verdict.signature in recorded:
            return result, tries or tries_for(case, result.verdict.signature, result.trace.env, seen), len(seen)
        if len(seen) >= most or time.monotonic() - t0 > budget_s:
            return None, most, len(seen)


def report(iso, say, indent: str = "") -> None:
    """The lines after the flips: the skipped settings (``indent``ed as the flips' lines) and the cause set."""
    from hybridfuzz.triage.isolate import text

    for s in iso.skipped:
        say(f"{indent}{s.key}: {text(s.value)}: not flipped: {s.why}")
    cause = ", ".join(f"{k}: {text(v)}" for k, v in iso.cause.items())
    say(f"cause: {{{cause}}}" + ("" if iso.finished else f" (unfinished: {iso.stopped or 'runs spoiled'})")
        + f"; {iso.engine_runs} engine runs, {iso.seconds:.0f}s, up to {iso.tries} run(s) a flip")


def as_json(iso) -> dict:
    return {"signature": iso.signature, "tries": iso.tries, "finished": iso.finished, "stopped": iso.stopped,
            "cause": iso.cause, "engine_runs": iso.engine_runs, "seconds": round(iso.seconds, 1),
            "flips": [{"key": r.key, "value": r.value, "to": r.to, "outcome": r.outcome, "runs": r.runs, "hits": r.hits,
                       "seen": list(r.seen)} for r in iso.results],
            "skipped": [{"key": s.key, "value": s.value, "why": s.why} for s in iso.skipped]}


def run(args) -> int:
    from hybridfuzz.case import dump_case
    from hybridfuzz.executor import needs_reference
    from hybridfuzz.hosts import make_host
    from hybridfuzz.oracles.health import decided_alone
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.isolate import isolate
    from hybridfuzz.triage.shrink import variants_at_once

    case, recorded = _finding(args.case)
    if args.write:
        options.file_to_write("--write", args.case)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    started = time.monotonic()
    with make_host(args.host, workers=args.workers, timeout=args.timeout, warm=False) as host:
        shown, tries, runs = shows_finding(case, recorded, host, args.timeout, args.budget / 2, args.tries,
                                        lambda line: say(f"{args.case}: {line}"))
        if shown is None:
            print(f"hybridfuzz: isolate: the case does not show its recorded {' or '.join(recorded)} here in {runs} "
                  "fresh run(s); nothing to isolate", file=sys.stderr, flush=True)
            if args.json:
                print(json.dumps({"case": args.case, "signature": recorded[0], "reproduced": False, "runs": runs}, indent=2))
            return FOUND
        signature = shown.verdict.signature
        alone = decided_alone(signature, shown.verdict.summary)
        parallel = variants_at_once(signature, max(1, args.workers // (2 if needs_reference(case) and not alone else 1)))
        left = args.budget - (time.monotonic() - started)
        say(f"isolating {signature}: {tries} run(s) a flip, {parallel} at a time, {max(left, 0):.0f}s of the "
            f"{args.budget:.0f}s budget left")
        iso = isolate(case, signature, host, left, parallel, tries, args.timeout, alone, say)
    report(iso, say)
    if args.write:
        write_atomic(args.case, dump_case(case.replace(cause=iso.cause)))
        say(f"written: cause into {args.case}")
    if args.json:
        print(json.dumps({"case": args.case, "reproduced": True, "written": args.write, **as_json(iso)}, indent=2))
    return OK if iso.finished else FOUND
