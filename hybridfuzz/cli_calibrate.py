"""``hybridfuzz calibrate``: measure quantization noise and the reference rule's false-alarm rate."""
from __future__ import annotations

import json


def cmd_calibrate(args) -> int:
    if args.traces:
        return _from_traces(args.traces)
    from hybridfuzz.calibrate import calibrate
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform

    # The dtypes the platform's attention backends declare (on CPU: fp8, fp8_e4m3, fp8_e5m2);
    # others the CPU engine accepts diverge far beyond noise (NOTES.md), so they are no baseline.
    from hybridfuzz.strategies.platform import declared_kv_dtypes

    dtypes = tuple(d for d in declared_kv_dtypes() if d != "auto")
    if args.kv_dtypes:
        dtypes = tuple(args.kv_dtypes.split(","))
    with make_host("forkserver", workers=args.workers, timeout=600) as host:
        report = calibrate(host, args.pairs, dtypes, args.seed)
    print(json.dumps(report, indent=2))
    return 0


def _from_traces(paths: list[str]) -> int:
    """The self-consistency rule against saved traces of repeated requests (python -m hybridfuzz.noise)."""
    from hybridfuzz.noise import load_records, summarize

    for path in paths:
        report = summarize(load_records(path))
        print(json.dumps({"traces": path, "groups": report}, indent=2))
    return 0


def register(sub) -> None:
    c = sub.add_parser("calibrate", help="run noisy-by-construction pairs (quantized KV vs auto) and report drift, flips, false alarms")
    c.add_argument("--pairs", type=int, default=40)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--kv-dtypes", help="comma-separated; default: the quantized dtypes the platform's attention backends declare")
    c.add_argument("--traces", nargs="+", help="instead: judge saved traces of repeated requests (made by "
                   "`python -m hybridfuzz.noise`, e.g. on a GPU) with the self-consistency rule: drift, flips, false alarms")
    c.set_defaults(func=cmd_calibrate)
