"""``hybridfuzz fuzz``: a bounded campaign with a progress display and a summary."""
from __future__ import annotations

import datetime
import os
import re
import time


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text.strip())
    if not m:
        raise ValueError(f"--budget: expected e.g. 90s, 20m or 2h; got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def narrow_platform(platform, args):
    """The platform narrowed by --kv-dtypes, --attention-backends and --eager-only (fuzz and campaign)."""
    from hybridfuzz.strategies.platform import narrow

    return narrow(platform, getattr(args, "kv_dtypes", None), getattr(args, "attention_backends", None),
                  getattr(args, "eager_only", False))


def _seconds(value) -> str:
    return "none" if value is None else f"{value}s"


def add_narrowing(p) -> None:
    p.add_argument("--kv-dtypes", help="only these KV dtypes (comma-separated; 'auto' stays the reference), e.g. fp8,fp8_e5m2")
    p.add_argument("--attention-backends", help="only these attention backends (comma-separated), e.g. TRITON_ATTN")
    p.add_argument("--eager-only", action="store_true", help="never capture CUDA graphs (much faster cases on GPU)")


def cmd_fuzz(args) -> int:
    import sys

    try:
        from rich.console import Console
    except ImportError:  # offline GPU hosts may lack rich: plain lines instead
        class Console:  # type: ignore[no-redef]
            def __init__(self, stderr=True):
                pass

            def print(self, text, highlight=False):
                print(text, file=sys.stderr, flush=True)

    from hybridfuzz.fuzzloop import FuzzConfig, FuzzLoop
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform

    try:
        budget = parse_duration(args.budget)
        platform = narrow_platform(detect_platform(), args)
    except ValueError as e:
        print(f"hybridfuzz: {e}", file=sys.stderr)
        return 2
    out = args.out or os.path.join("runs", datetime.datetime.now().strftime("fuzz-%Y%m%d-%H%M%S"))
    # In a checkout (./corpus exists) minimal cases go to corpus/found and every corpus case's
    # signature counts as known, so a bug already in the corpus is not shrunk again.
    in_checkout = os.path.isdir("corpus")
    findings = args.findings or (os.path.join("corpus", "found") if in_checkout else os.path.join(out, "findings"))
    if args.known is None and in_checkout:
        args.known = ["corpus"]
    console = Console(stderr=True)
    if args.engine == "gpu" and platform.device != "cuda":
        print("hybridfuzz: --engine gpu: this machine's vLLM has no CUDA device", file=sys.stderr)
        return 3
    console.print(f"hybridfuzz fuzz: engine {platform.device}, budget {budget:.0f}s, seed {args.seed}, out {out}, findings {findings}")
    last = [0.0]

    def progress(stats, phase):
        now = time.time()
        if now - last[0] > 5 or phase == "shrink":
            last[0] = now
            console.print(f"  [{now - stats.started:6.0f}s] {phase:8} cases {stats.cases:4}  findings {len(stats.findings)}", highlight=False)

    workers = args.workers or (2 if platform.device == "cpu" else 8)
    with make_host(args.host, workers=workers, timeout=args.timeout) as host:
        cfg = FuzzConfig(budget_s=budget, out_dir=out, findings_dir=findings, seed=args.seed, timeout_s=args.timeout,
                         known_dirs=tuple(args.known or ()), max_layers=args.max_layers, max_steps=args.max_steps)
        loop = FuzzLoop(cfg, host, platform, progress)
        stats = loop.run()
    summary = loop.write_summary()
    console.print(f"done: {summary['cases']} cases in {summary['elapsed_s']}s; {summary['findings']} new findings; "
                  f"time to first finding {_seconds(summary['time_to_first_finding_s'])}; shrinking {summary['shrink_s']}s; "
                  f"not replayed {summary['not_replayed']}")
    for f in summary["finding_list"]:
        console.print(f"  {f['signature']}: {f['path']}\n    {f['summary']}", highlight=False)
    console.print(f"summary: {os.path.join(out, 'summary.json')}")
    return 1 if stats.findings else 0


def register(sub) -> None:
    f = sub.add_parser("fuzz", help="run a bounded fuzz campaign (exit 1 when it found something new)")
    f.add_argument("--engine", default="cpu", choices=["cpu", "gpu"], help="which vLLM the cases target (the installed one)")
    f.add_argument("--budget", default="20m", help="wall-clock budget, e.g. 90s, 20m, 2h")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--out", help="campaign directory (summary.json, events.jsonl, hypothesis-db); default runs/fuzz-<time>")
    f.add_argument("--findings", help="where minimal YAML cases go (default corpus/found in a checkout, else OUT/findings)")
    f.add_argument("--known", action="append", help="directory of cases whose signatures are already known (repeatable; default corpus/ in a checkout)")
    f.add_argument("--host", default="forkserver", choices=["forkserver", "subprocess", "server"])
    f.add_argument("--workers", type=int, default=0, help="engines at once (default: 2 on CPU, 8 on GPU)")
    f.add_argument("--timeout", type=float, default=300.0, help="seconds per engine run before it counts as a hang")
    add_narrowing(f)
    f.add_argument("--max-layers", type=int, default=8)
    f.add_argument("--max-steps", type=int, default=6)
    f.set_defaults(func=cmd_fuzz)
