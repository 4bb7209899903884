"""``hybridfuzz bench --faults all|NAME[:SEV][,NAME...]|clean``: detection power per injected fault.

Options only; the work is ``hybridfuzz/bench/faults.py``. Rows merge into one table
(``--table``, default results/faults-cpu-<date>-vllm-<version>.json and .md), so each
fault can run in its own invocation (one engine-lock acquisition each).
"""
from __future__ import annotations

import json
import shlex
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError


FAULT_FUZZ_ARGS = "--max-layers 4 --max-steps 4"


def _duration(text: str) -> float:
    return options._duration(text)


def add_arguments(p) -> None:
    p.add_argument("--faults", help="detection power instead: 'all', fault names (name:severity grades one), or 'clean' for the no-fault run")
    p.add_argument("--budget-per-fault", type=_duration, default=600.0, help="fuzz budget per fault (e.g. 10m); --faults clean runs --clean-budget")
    p.add_argument("--clean-budget", type=_duration, help="budget of the clean run (default: the wall time the table's fault rows took, "
                   "else budget-per-fault x the catalogue's size)")
    p.add_argument("--full-budget", action="store_true", help="run each fault's whole budget (default: stop at the fault's first finding, "
                   "then shrink it with `hybridfuzz shrink`)")
    p.add_argument("--shrink-budget", type=_duration, default=120.0, help="time to shrink each fault's first finding (default 2m)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--table", help="table to merge rows into (default results/faults-cpu-<date>-vllm-<version>.json, "
                   "--releases: results/releases-cpu-<date>-judge-<version>.json)")
    p.add_argument("--runs", help="directory for the fuzz runs (default runs/faultbench, --releases: runs/releasebench)")
    p.add_argument("--fuzz-args", help=f"extra arguments for each `hybridfuzz fuzz` run, e.g. '--kv-dtypes float16' "
                   f"(default {FAULT_FUZZ_ARGS!r}; --releases: none, the default fuzzer)")


def run(args) -> int:
    import os

    from hybridfuzz.bench import faults as faultbench
    from hybridfuzz.faults import names
    from hybridfuzz.faults.spec import FaultSpecError

    try:
        faults = faultbench.resolve(args.faults)
    except FaultSpecError as e:
        raise UsageError(f"--faults: {str(e).split(': ', 1)[1]}") from None
    args.runs = args.runs or "runs/faultbench"
    os.makedirs(args.runs, exist_ok=True)
    table_path = args.table or faultbench.table_path()
    command = "hybridfuzz bench " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "hybridfuzz bench --faults " + args.faults
    table = None
    for fault in faults:
        if fault == faultbench.CLEAN:
            budget = args.clean_budget or faultbench.faults_elapsed_s(table_path) or args.budget_per_fault * len(names())
        else:
            budget = args.budget_per_fault
        row = faultbench.unreachable_row(fault, args.seed)
        if row is not None:
            print(f"hybridfuzz bench --faults: {fault}: not on CPU ({row.unreachable})", file=sys.stderr, flush=True)
            table = faultbench.merge(table_path, [row], command if table is None else None)
            continue
        print(f"hybridfuzz bench --faults: {fault}, {budget:.0f} s", file=sys.stderr, flush=True)
        row = faultbench.run_fault(fault, budget, args.seed, args.runs, shlex.split(FAULT_FUZZ_ARGS if args.fuzz_args is None else args.fuzz_args), args.timeout, args.full_budget,
                                   args.shrink_budget)
        print(f"  {fault}: found={row.found} t={row.time_to_find_s} oracle={row.oracle} size={row.shrunk_size} other={row.other}", file=sys.stderr, flush=True)
        # each row lands in the table as soon as it is measured: a bench cut short keeps the faults it finished
        table = faultbench.merge(table_path, [row], command if table is None else None)
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        print(faultbench.markdown(table))
    return 0
