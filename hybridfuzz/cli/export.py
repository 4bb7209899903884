"""``hybridfuzz export BUG``: a ledger bug as one vLLM bug report (Markdown) with its standalone reproducer;
``hybridfuzz export CASE.yaml`` does the same for a single case."""
from __future__ import annotations

import dataclasses
import os
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "export"
HELP = "write a bug of the ledger (or one case) as a vLLM bug report (Markdown) with a standalone reproducer script"
EXITS = {0: "written (the script: exit 1 = reproduced, 0 = not reproduced, 3 = did not run)"}
DEFAULT_OUT = os.path.join("runs", "exports")  # gitignored: an export is generated, never committed


def add_arguments(p) -> None:
    p.add_argument("target", metavar="BUG|CASE.yaml", help="a bug id of the ledger (corpus/bugs.yaml), or a YAML case")
    p.add_argument("--ledger", default=os.path.join("corpus", "bugs.yaml"), help="the bug ledger (default: corpus/bugs.yaml)")
    p.add_argument("--corpus", default=None, help="the corpus whose cases name the bugs (default: the ledger's folder)")
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"a folder for NAME.md and its script (default: {DEFAULT_OUT}), or a .md file (the script beside it)")
    p.add_argument("--script", help="write the standalone reproducer script here instead")
    # dest is not "run": the command table keeps each command's function in args.run
    p.add_argument("--run", dest="run_now", action="store_true",
                   help="run the script standalone here (no hybridfuzz); a BUG's run is recorded in the ledger with this machine's collect_env")
    p.add_argument("--timeout", type=options.seconds, default=1800.0, help="seconds for --run (default 1800)")
    p.add_argument("--no-collect-env", dest="collect_env", action="store_false",
                   help="with --run: skip `python -m vllm.collect_env` (about 15 s); the issue then has no environment")


def _paths(args, name: str) -> tuple[str, str]:
    """(the Markdown, the script) for ``name`` (the bug id or the case's stem)."""
    from hybridfuzz.export import default_script_name

    if args.out.endswith(".md"):
        options.file_to_write("--out", args.out)
        md = args.out
    else:
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise UsageError(f"--out {args.out}: not a folder (give a folder, or a file ending in .md)")
        md = os.path.join(args.out, f"{name}.md")
    options.file_to_write("--script", args.script)
    return md, args.script or os.path.join(os.path.dirname(md), default_script_name(name))


def _report(args):
    """The Report of a bug id or a case file."""
    from hybridfuzz import export

    if args.target.endswith((".yaml", ".yml")) or os.path.isfile(args.target):
        from hybridfuzz.case import load_case_file

        case = load_case_file(args.target)
        return export.case_report(case, args.target, export.issue_title(case).removeprefix("[Bug]: "))
    from hybridfuzz.triage.ledger import load_ledger

    if not os.path.isfile(args.ledger):
        raise UsageError(f"export {args.target}: no ledger {args.ledger} (give --ledger, or a case file ending in .yaml)")
    try:
        here = None
        if args.run:  # the member to run is one seen on this kind of machine, where the bug's device allows
            from hybridfuzz.export.run import device_name

            here = "cpu" if device_name().startswith("CPU") else "gpu"
        return export.bug_report(load_ledger(args.ledger, args.corpus), args.target, here)
    except export.NothingToReport as e:
        raise UsageError(f"export: {e}") from None


def run(args) -> int:
    from hybridfuzz import export
    from hybridfuzz.export.run import device_name, run_standalone
    from hybridfuzz.store import write_atomic
    from hybridfuzz.triage.ledger import record_run

    report = _report(args)
    md, script_path = _paths(args, report.name)
    script_name = os.path.basename(script_path)
    try:
        script = export.standalone_script(report.case, title=report.title, case_name=report.case_name, script_name=script_name,
                                          observation=report.observation)
    except ValueError as e:  # a case of a kind this vLLM's exporter cannot write a script for
        raise UsageError(f"export: {e}") from None
    try:
        write_atomic(script_path, script)
    except OSError as e:
        raise UsageError(f"export: cannot write {script_path}: {e.strerror or e}") from None
    run = output = None
    if args.run_now:
        print(f"hybridfuzz export: running {script_path} standalone ...", file=sys.stderr)
        run, output = run_standalone(script_path, args.timeout, collect_env=args.collect_env)
        print(run.line, file=sys.stderr)
        if report.bug is not None:
            record_run(report.bug.id, run, args.ledger)
            print(f"recorded in {args.ledger}: {run.device}, vLLM {run.vllm}, exit {run.exit_code}", file=sys.stderr)
            report = _report(args)  # the ledger as it is now, this run included
        else:
            report = dataclasses.replace(report, runs=[*report.runs, run])
    exporter = run.device if run is not None else device_name()
    body = export.issue_markdown(report, run=run, script_output=output, script_name=script_name, script=script, exporter=exporter)
    try:
        write_atomic(md, body)
    except OSError as e:
        raise UsageError(f"export: cannot write {md}: {e.strerror or e}") from None
    print(f"wrote {md} and {script_path}", file=sys.stderr)
    return 0
