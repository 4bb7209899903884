"""The ``hybridfuzz`` command line. Every subcommand is a thin layer over a module."""
from __future__ import annotations

import argparse
import json
import sys

from hybridfuzz.case import CaseError, dump_case, load_case_file
from hybridfuzz.findings import observation, with_observation


def _print_result(case_path: str, result, as_json: bool) -> None:
    v = result.verdict
    if as_json:
        print(json.dumps({"case": case_path, "status": v.status, "oracle": v.oracle, "summary": v.summary,
                          "signature": v.signature, "evidence": v.evidence, "engine_settings": result.trace.engine_settings,
                          "timings": result.trace.timings, "env": result.trace.env}, indent=2))
        return
    print(v.one_line())
    for line in v.evidence:
        print("  " + line.replace("\n", "\n  "))
    s = result.trace.engine_settings
    if s:
        print("  engine: " + ", ".join(f"{k}={v}" for k, v in s.items()))
    t = result.trace.timings
    if t:
        print("  timings: " + ", ".join(f"{k}={v:.2f}s" for k, v in t.items()))


def cmd_replay(args) -> int:
    from hybridfuzz.executor import evaluate
    from hybridfuzz.hosts import make_host
    from hybridfuzz.store import write_atomic

    case = load_case_file(args.case)
    with make_host(args.host, workers=2, timeout=args.timeout, warm=False) as host:
        result = evaluate(case, host, args.timeout)
    _print_result(args.case, result, args.json)
    if args.record:
        write_atomic(args.case, dump_case(with_observation(case, observation(result))))
    return result.verdict.exit_code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hybridfuzz", description="Fuzz vLLM hybrid (GDN/Mamba + attention) models for silent state corruption.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("replay", help="run one YAML case, apply its oracle, print the verdict (exit 0 pass, 1 divergence, 2 invalid, 3 unsupported)")
    r.add_argument("case")
    r.add_argument("--host", default="forkserver", choices=["forkserver", "subprocess"], help="forkserver: fast, isolated; subprocess: a plain new process with vLLM defaults")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds per engine run before it counts as a hang")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.add_argument("--record", action="store_true", help="append this run's observation (vLLM version, verdict) to the case file")
    r.set_defaults(func=cmd_replay)

    from hybridfuzz import commands

    commands.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    from hybridfuzz import _guard

    _guard.install()  # torchvision guard for this process and the engines it starts (never on import)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CaseError as e:
        print(f"hybridfuzz: invalid case: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hybridfuzz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
