"""``hybridfuzz atheris {loader,components}``: one of the coverage-guided harnesses in fuzz/
(atheris/libFuzzer) with a libFuzzer corpus directory."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from hybridfuzz.cli import options
from hybridfuzz.components.search import PROPERTIES
from hybridfuzz.cli.errors import FOUND, INTERRUPTED, OK, UsageError

NAME = "atheris"
HELP = "coverage-guided fuzzing (atheris/libFuzzer) of the case loader or the component properties"
EXITS = {0: "no crash in the runs", 1: "the harness found a crash (libFuzzer's output says where)"}
FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fuzz")


def add_arguments(p) -> None:
    p.add_argument("harness", choices=["loader", "components"])
    p.add_argument("--runs", type=options.positive_int, default=10000)
    p.add_argument("--corpus", default=None, help="libFuzzer corpus directory (created; seeded with corpus/*.yaml for the loader)")
    p.add_argument("--property", default="kv_layout", choices=list(PROPERTIES))
    p.add_argument("--out", default=os.path.join("corpus", "found"))
    p.add_argument("--libfuzzer", default=None, help="extra libFuzzer flags in one string (default: components '-max_len=4096 -len_control=0', loader '-max_len=512')")


def run(args) -> int:
    script = os.path.join(FUZZ_DIR, f"atheris_{args.harness}.py")
    if not os.path.exists(script):
        raise UsageError(f"atheris: no harness {script} (the fuzz/ folder of a checkout)")
    try:
        import atheris  # noqa: F401
    except ImportError:
        raise UsageError("atheris: needs the atheris package: pip install -e .[atheris]") from None
    argv = [sys.executable, script]
    if args.harness == "components":
        argv += ["--property", args.property, "--out", args.out]
    extra = args.libfuzzer if args.libfuzzer is not None else ("-max_len=4096 -len_control=0" if args.harness == "components" else "-max_len=512")
    argv += [f"-atheris_runs={args.runs}", *extra.split()]
    if args.corpus:
        options.dir_to_write("--corpus", args.corpus)
        os.makedirs(args.corpus, exist_ok=True)
        argv.append(args.corpus)
    rc = subprocess.call(argv)
    if rc in (INTERRUPTED, -signal.SIGINT):
        return INTERRUPTED
    return OK if rc == 0 else FOUND  # libFuzzer's own codes (1, 77, a signal) all mean a crash input was found
