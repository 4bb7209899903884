"""``hybridfuzz shrink CASE.yaml``: make a failing YAML case minimal on the installed vLLM."""
from __future__ import annotations

import json
import os
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import FOUND, INTERRUPTED, OK, USAGE, UsageError
from hybridfuzz.engines.base import Host

NAME = "shrink"
HELP = "shrink a failing YAML case to a minimal one with the same signature, then isolate its cause set (exit 0 when written)"
EXITS = {0: "a minimal case was written and replays", 1: "the case does not fail here (or the result did not replay)"}


def add_arguments(p) -> None:
    p.add_argument("case", nargs="+", help="a failing YAML case (kind: engine); several are shrunk at once, each in its "
                                          "own process with --workers engines")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", help="where the minimal case goes (default CASE.min.yaml; written after every step)")
    where.add_argument("--in-place", action="store_true", help="overwrite CASE itself (atomically, after every step)")
    p.add_argument("--signature", help="the failure to keep (default: one the case file records, tried on as many "
                                       f"fresh runs as its recorded rate needs, at least {RECORDED_TRIES}; for a case "
                                       "that records none, what its first run shows)")
    options.add_budget(p, "30m", "wall-clock budget of the first replay and the search together (the replay that confirms "
                       "the result comes after it)")
    p.add_argument("--workers", type=options.positive_int, default=2, help="engines at once (variants run in parallel)")
    p.add_argument("--tries", type=options.positive_int, default=None,
                   help="fresh runs a batch of variants gets before none of them counts as failing (default: from the "
                        "rate the case file records for the finding and the first runs here, so that a finding that "
                        "shows only sometimes is missed at most 1%% of the time, at most 6; 1 for one seen every time)")
    p.add_argument("--warm", action="store_true",
                   help="on a warm fork server, as `fuzz` runs (default: cold, as a fresh process; a finding only a warm "
                        "server shows, such as one a cold AMX CPU hides behind its SIGILL, needs this)")
    p.add_argument("--no-isolate", action="store_true",
                   help="leave out the cause isolation that follows a finished shrink whose minimal case replayed (as "
                        "`hybridfuzz isolate`, within what is left of --budget; its cause set is written as cause:)")
    options.add_timeout(p)
    options.add_json(p)


# Fresh runs a shrink gives a case that records its finding before it gives up on it (at most half its budget), at
# least: a recorded finding of the per-token-head class reproduced in 3 of 6 runs on the H100 of 2026-12-05.
RECORDED_TRIES = 3


def first_runs(case, recorded: list[str], device) -> int:
    """Fresh runs the case gets to show one of its ``recorded`` signatures before the shrink gives up: as many as the
    best-recorded one's rate needs (reproduce.shrink_tries, the search's own rule), at least RECORDED_TRIES. A device-fault
    case on the H100 (vLLM 0.33.0, 2026-12-05), recorded in 2 of 4 runs, was given 3 and gave up (results/2026-12-05-h100-vllm0.33.0-int4-calibration/)."""
    from hybridfuzz.triage.reproduce import recorded_rate, shrink_tries

    return max([RECORDED_TRIES, *(shrink_tries(*recorded_rate(case, sig, device)) for sig in recorded)])


def shrink_targets(case) -> list[str]:
    """What a shrink of ``case`` keeps to when no --signature is given: the signatures its file records for its
    finding (findings.recorded_signatures), and the device-fault signature where a recorded run names a GPU fault
    (recorded before device faults had a signature of their own, failures.py DEVICE_FAULT). A case that records
    no finding (a hand-written one): none, and the first run's failure is the target."""
    from hybridfuzz.failures import DEVICE_FAULT
    from hybridfuzz.oracles.health import device_fault_signature
    from hybridfuzz.triage.findings import recorded_signatures

    targets = recorded_signatures(case)
    if any(DEVICE_FAULT.search(o.summary) for o in case.observed if o.verdict == "divergence"):
        targets.append(device_fault_signature(case))
    return targets


def output_path(case: str, in_place: bool = False, out: str | None = None) -> str:
    """Where the minimal case of ``case`` goes: itself with --in-place, --out, else CASE.min.yaml."""
    if in_place:
        return case
    if out:
        return out
    stem = case[:-5] if case.endswith(".yaml") else case
    return stem + ".min.yaml"


def _engine_case(path: str, out: str):
    """The case at ``path``, refused in one line if it cannot be shrunk here or its output cannot be written."""
    from hybridfuzz.case import load_case_file

    case = load_case_file(path)
    if case.kind == "component":
        raise UsageError(f"shrink: {path}: component cases are shrunk by `hybridfuzz check-components`")
    options.file_to_write("--out", out)
    return case


def run(args) -> int:
    if len(args.case) > 1:
        return _several(args)
    args.case = args.case[0]
    return _one(args)


def _several(args) -> int:
    """Each case in its own ``hybridfuzz shrink`` process, all at once: as the H200 ran eight shrinks of one
    campaign's findings on 2026-12-04 (results/2026-12-04-h200-vllm0.33.0-replays-shrinks/README.md), now one command. Every line a
    process prints comes prefixed with its case's file name; with --json, stdout is the list of their JSON."""
    import subprocess
    import threading

    if args.out:
        raise UsageError("shrink: --out names one file; with several cases use --in-place or the default CASE.min.yaml")
    for path in args.case:  # bad input is one line before any engine starts
        _engine_case(path, output_path(path, args.in_place))
    flags = ["--budget", f"{args.budget}s", "--workers", str(args.workers), "--timeout", str(args.timeout)]
    flags += ["--in-place"] * args.in_place + ["--json"] * args.json + ["--warm"] * args.warm + ["--no-isolate"] * args.no_isolate + (["--signature", args.signature] if args.signature else [])
    flags += ["--tries", str(args.tries)] if args.tries else []
    lock = threading.Lock()

    def relay(stream, name: str, to, keep: list | None) -> None:
        for line in stream:
            if keep is not None:
                keep.append(line)
                continue
            with lock:
                print(f"[{name}] {line}", end="", file=to, flush=True)

    procs, outs, relays = [], [], []
    for path in args.case:
        p = subprocess.Popen([sys.executable, "-m", "hybridfuzz.cli", "shrink", path, *flags], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        name, out = os.path.basename(path), []
        relays += [threading.Thread(target=relay, args=(p.stdout, name, sys.stdout, out if args.json else None)),
                   threading.Thread(target=relay, args=(p.stderr, name, sys.stderr, None))]
        procs.append(p)
        outs.append(out)
    for t in relays:
        t.start()
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:  # each child had the signal too: it writes what it found so far and ends
        codes = [p.wait() for p in procs]
    for t in relays:
        t.join()
    if args.json:
        print(json.dumps([json.loads("".join(out)) if out else {"case": path, "written": None, "exit": code}
                          for path, out, code in zip(args.case, outs, codes)], indent=2))
    for code in (INTERRUPTED, USAGE, FOUND):
        if code in codes:
            return code
    return OK


def _one(args) -> int:
    import time

    from hybridfuzz.case import device_kind, dump_case
    from hybridfuzz.executor import needs_reference, replay
    from hybridfuzz.hosts import make_host
    from hybridfuzz.oracles.health import decided_alone
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.findings import observation_of, with_observation
    from hybridfuzz.triage.reproduce import recorded_rate, shrink_tries
    from hybridfuzz.triage.shrink import describe, shrink, variants_at_once

    out = output_path(args.case, args.in_place, args.out)
    case = _engine_case(args.case, out)
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.json else print
    started = time.monotonic()
    kept: list[str] = []  # the simplifications written to ``out`` so far
    target = args.signature or ""

    def keep(c, v, env, why):
        write_atomic(out, dump_case(with_observation(c.replace(cause={}), observation_of(v, env))))
        kept.append(why)

    try:
        with make_host("forkserver", workers=args.workers, timeout=args.timeout, warm=args.warm) as host:
            # replay: a start-up timeout gets twice the time before it is the target (on a loaded H200 every shrink
            # of 2026-12-04 took its case's start-up timeout for the finding and shrank toward it)
            recorded = [args.signature] if args.signature else shrink_targets(case)
            first = replay(case, host, args.timeout)
            say(f"{args.case}: {first.verdict.one_line()}")
            seen = [first.verdict]
            most = first_runs(case, recorded, device_kind(str(first.trace.env.get("device", "cpu"))))
            while (recorded and first.verdict.signature not in recorded and len(seen) < most
                   and time.monotonic() - started < args.budget / 2):
                first = replay(case, host, args.timeout)  # a recorded finding that reproduces only sometimes
                say(f"{args.case}: again: {first.verdict.one_line()}")
                seen.append(first.verdict)
            target = first.verdict.signature if not recorded or first.verdict.signature in recorded else ""
            if not target:
                shown = ", ".join(sorted({f"{v.status} {v.signature}".strip() for v in seen}))
                wanted = (("" if args.signature else "its recorded ") + " or ".join(recorded)) if recorded else "a divergence"
                print(f"hybridfuzz: shrink: the case does not fail here with {wanted} in {len(seen)} fresh "
                      f"run(s) (seen: {shown}); nothing to shrink"
                      + ("; pass --signature SIG to shrink what it shows now" if recorded and not args.signature else ""),
                      file=sys.stderr, flush=True)
                if args.json:
                    print(json.dumps({"case": args.case, "written": None, "status": first.verdict.status,
                                      "signature": first.verdict.signature, "target": " or ".join(recorded)}, indent=2))
                return FOUND
            env = first.trace.env
            alone = decided_alone(target, first.verdict.summary)
            per_case = 2 if needs_reference(case) and not alone else 1
            parallel = variants_at_once(target, max(1, args.workers // per_case))
            hits, runs = recorded_rate(case, target, device_kind(str(env.get("device", "cpu"))), [v.signature for v in seen])
            tries = args.tries or shrink_tries(hits, runs)
            # the budget is the command's: on a cold GPU host the first replay of 2026-12-05 took minutes, and
            # seven shrinks of --budget 460s searched on to about 690 s (results/2026-12-05-h200-vllm0.33.0-shrinks/)
            left = args.budget - (time.monotonic() - started)
            rate = f" (given; {hits} of {runs} runs recorded)" if args.tries else f" ({hits} of {runs} runs recorded)"
            say(f"shrinking {describe(case)} toward {target}: {parallel} variant(s) at a time"
                + (f", {tries} tries a batch{rate}" if tries > 1 or args.tries else "")
                + f", {max(left, 0):.0f}s of the {args.budget:.0f}s budget left -> {out}")
            result = shrink(case, target, host, left, parallel, args.timeout,
                            on_smaller=lambda c, v, why: keep(c, v, env, why), log=say, alone=alone, tries=tries)
            confirm = replay(result.case, host, args.timeout)
            same = _write_minimal(out, target, result, confirm, first.verdict, env, say)
            isolated = None
            if same and result.finished and not args.no_isolate:
                isolated = _isolate_minimal(args, out, target, host, args.budget - (time.monotonic() - started), parallel,
                                            result.tries, alone, say)
    except KeyboardInterrupt:
        say(f"hybridfuzz: interrupted; {'the smallest case so far is in ' + os.path.relpath(out) if kept else 'nothing smaller was found yet'}")
        if args.json:  # a script reading stdout learns what was kept, as after a finished shrink
            print(json.dumps({"case": args.case, "written": out if kept else None, "target": target, "finished": False,
                              "stopped": "interrupted", "simplifications": kept, "seconds": round(time.monotonic() - started, 1)},
                             indent=2), flush=True)
        return INTERRUPTED
    if args.json:
        print(json.dumps({"case": args.case, "written": out, "target": target, "finished": result.finished, "stopped": result.stopped,
                          "simplifications": result.accepted, "engine_runs": result.runs, "seconds": round(result.seconds, 1),
                          "tries": result.tries,
                          "replayed": same, "status": confirm.verdict.status, "signature": confirm.verdict.signature,
                          "cause": isolated.cause if isolated else None}, indent=2))
    return OK if same else FOUND


def _write_minimal(out: str, target: str, result, confirm, first, env: dict, say) -> bool:
    """Write the shrink's result to ``out`` with its confirmation's observation and a note of the shrink; whether the
    confirmation replayed the target. A cause set the unshrunk case recorded goes: it was isolated on another case."""
    from hybridfuzz.case import dump_case
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.findings import observation_of, with_observation
    from hybridfuzz.triage.shrink import describe

    same = confirm.verdict.signature == target
    note = (f"shrunk by `hybridfuzz shrink` ({len(result.accepted)} simplifications, {result.runs} engine runs, "
            f"{result.seconds:.0f}s{'' if result.tries == 1 else f', up to {result.tries} runs a variant'}"
            f"{'' if result.finished else ', ' + result.stopped}); replayed on a fresh engine: "
            f"{'same signature' if same else confirm.verdict.status + ' ' + confirm.verdict.signature}.")
    # a confirmation that did not run the case has no environment of its own (on the H200 of 2026-12-04 three
    # confirmations met a host without its GPU and wrote "vllm: unknown" on a CPU's ISA): the kept run's verdict
    # then goes with the first run's environment, the engine that showed the target; with nothing kept, so does the
    # first run's own verdict
    minimal = result.case.replace(cause={}) if result.accepted else result.case
    final = with_observation(minimal, observation_of(confirm.verdict, confirm.trace.env) if same
                             else observation_of(result.verdict or first, env))
    earlier = final.note.rstrip()
    if earlier and not earlier.endswith("."):
        earlier += "."
    final = final.replace(note=(earlier + " " if earlier else "") + note)
    write_atomic(out, dump_case(final))
    say(f"{'minimal' if result.finished else f'smaller ({result.stopped})'}: {describe(result.case)} after "
        f"{len(result.accepted)} simplifications, {result.runs} engine runs, {result.seconds:.0f}s")
    say(f"replayed on a fresh engine: {confirm.verdict.one_line()}")
    say(f"written: {os.path.relpath(out)}")
    return same


def _isolate_minimal(args, out: str, target: str, host: Host, left: float, parallel: int, tries: int, alone: bool, say):
    """Cause isolation (``hybridfuzz isolate``) of the minimal case just written and replayed, on the same host, within
    what is left of --budget, with the shrink's runs a variant; its cause set goes into ``out``. None without budget."""
    from hybridfuzz.case import dump_case, load_case_file
    from hybridfuzz.cli.isolate import report
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.isolate import isolate

    if left <= 0:
        say(f"not isolated: no budget left (`hybridfuzz isolate {os.path.relpath(out)} --write` does it)")
        return None
    minimal = load_case_file(out)
    say(f"isolating the cause: each setting flipped to its neutral value, {tries} run(s) a flip, {max(left, 0):.0f}s left")
    isolated = isolate(minimal, target, host, left, parallel, tries, args.timeout, alone, lambda line: say("  " + line))
    report(isolated, say, indent="  ")
    write_atomic(out, dump_case(minimal.replace(cause=isolated.cause)))
    return isolated
