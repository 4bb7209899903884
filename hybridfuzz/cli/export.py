"""``hybridfuzz export CASE.yaml``: a finding as a vLLM bug report (Markdown) with a standalone reproducer."""
from __future__ import annotations

import os
import sys
import tempfile

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "export"
HELP = "write a finding as a vLLM bug report (Markdown) with a standalone reproducer script"
EXITS = {0: "written (the script: exit 1 reproduced, 0 not reproduced, 2 cannot tell)"}


def add_arguments(p) -> None:
    p.add_argument("case", help="a YAML case (usually a finding)")
    p.add_argument("--out", help="write the Markdown here (default: stdout)")
    p.add_argument("--script", help="also write the standalone reproducer script here")
    # dest is not "run": the command table keeps each command's function in args.run
    p.add_argument("--run", dest="run_now", action="store_true", help="run the reproducer now and put its output in the issue")
    p.add_argument("--timeout", type=options.seconds, default=1200.0, help="seconds for --run")
    p.add_argument("--no-collect-env", dest="collect_env", action="store_false", help="skip `python -m vllm.collect_env` (about 15 s)")


def run(args) -> int:
    from hybridfuzz import export
    from hybridfuzz.case import load_case_file
    from hybridfuzz.store import write_atomic

    case = load_case_file(args.case)
    options.file_to_write("--out", args.out)
    options.file_to_write("--script", args.script)
    title = export.issue_title(case).removeprefix("[Bug]: ")
    name = os.path.basename(args.case)
    script_name = os.path.basename(args.script) if args.script else export.default_script_name(name)
    try:
        script = export.standalone_script(case, title=title, case_name=name, script_name=script_name)
    except ValueError as e:  # a case of a kind this vLLM's exporter cannot write a script for
        raise UsageError(f"export: {e}") from None
    if args.script:
        write_atomic(args.script, script)
    output = rc = None
    if args.run_now:
        with tempfile.TemporaryDirectory(prefix="hybridfuzz-export-") as tmp:
            path = os.path.join(tmp, script_name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(script)
            print(f"hybridfuzz export: running {script_name} ...", file=sys.stderr)
            env = dict(os.environ, VLLM_LOGGING_STREAM="ext://sys.stderr")
            rc, output = export.run_script(path, timeout=args.timeout, env=env, cwd=tmp)
            output = "\n".join(line for line in output.splitlines() if not line.startswith("Triton is installed"))
    env_text = export.collect_env_text() if args.collect_env else None
    body = export.issue_markdown(case, case_name=name, env_text=env_text, script_output=output, script_rc=rc,
                                 script_name=script_name)
    if args.out:
        write_atomic(args.out, body)
        print(f"wrote {args.out}" + (f" and {args.script}" if args.script else ""), file=sys.stderr)
    else:
        sys.stdout.write(body)
    return 0
