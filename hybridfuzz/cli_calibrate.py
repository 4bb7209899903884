"""``hybridfuzz calibrate``: measure quantization noise and the reference rule's false-alarm rate."""
from __future__ import annotations

import json


def cmd_calibrate(args) -> int:
    from hybridfuzz.calibrate import calibrate
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform

    dtypes = tuple(d for d in detect_platform().kv_cache_dtypes if d.startswith("fp8") and "ds_mla" not in d)
    if args.kv_dtypes:
        dtypes = tuple(args.kv_dtypes.split(","))
    with make_host("forkserver", workers=args.workers, timeout=600) as host:
        report = calibrate(host, args.pairs, dtypes, args.seed)
    print(json.dumps(report, indent=2))
    return 0


def register(sub) -> None:
    c = sub.add_parser("calibrate", help="run noisy-by-construction pairs (quantized KV vs auto) and report drift, flips, false alarms")
    c.add_argument("--pairs", type=int, default=40)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--kv-dtypes", help="comma-separated; default: the fp8 dtypes the platform offers")
    c.set_defaults(func=cmd_calibrate)
