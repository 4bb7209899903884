"""Subcommands ``export`` (finding -> upstream issue body), ``corpus`` (triage) and ``report`` (campaign HTML)."""
from __future__ import annotations

import os
import sys
import tempfile


def cmd_export(args) -> int:
    from hybridfuzz import export
    from hybridfuzz.case import load_case_file

    case = load_case_file(args.case)
    title = export.issue_title(case).removeprefix("[Bug]: ")
    name = os.path.basename(args.case)
    script_name = os.path.basename(args.script) if args.script else export.default_script_name(name)
    script = export.standalone_script(case, title=title, case_name=name, script_name=script_name)
    if args.script:
        with open(args.script, "w", encoding="utf-8") as f:
            f.write(script)
    output = rc = None
    if args.run:
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
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(body)
        print(f"wrote {args.out}" + (f" and {args.script}" if args.script else ""), file=sys.stderr)
    else:
        sys.stdout.write(body)
    return 0


def cmd_corpus(args) -> int:
    from hybridfuzz import triage

    dirs = args.dirs or ["corpus"]
    groups, clean = triage.group(triage.load_entries(dirs))
    print(triage.render_json(groups, clean) if args.json else triage.render_text(groups, clean))
    return 0


def cmd_report(args) -> int:
    from hybridfuzz import report

    out = args.out or os.path.join(args.dir, "report.html")
    html = report.render(report.load_campaign(args.dir))
    with open(out, "w", encoding="utf-8") as f:
        f.write(html)
    print(out)
    return 0


def register(sub) -> None:
    e = sub.add_parser("export", help="write a finding as a vLLM bug report (Markdown) with a standalone reproducer script")
    e.add_argument("case")
    e.add_argument("--out", help="write the Markdown here (default: stdout)")
    e.add_argument("--script", help="also write the standalone reproducer script here")
    e.add_argument("--run", action="store_true", help="run the reproducer now and put its output in the issue")
    e.add_argument("--timeout", type=float, default=1200.0, help="seconds for --run")
    e.add_argument("--no-collect-env", dest="collect_env", action="store_false", help="skip `python -m vllm.collect_env` (about 15 s)")
    e.set_defaults(func=cmd_export)

    c = sub.add_parser("corpus", help="list findings grouped by signature with their status per vLLM version")
    c.add_argument("dirs", nargs="*", help="directories or case files (default: corpus)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_corpus)

    r = sub.add_parser("report", help="an HTML page with plots for a campaign directory")
    r.add_argument("dir")
    r.add_argument("--out", help="default: DIR/report.html")
    r.set_defaults(func=cmd_report)
