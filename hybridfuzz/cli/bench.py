"""``hybridfuzz bench``: per-case latency, cases/min and peak memory, naive vs fast path;
or ``--at-once N,M``: that many fresh engines started at the same moment;
or ``--faults``: detection power per injected fault (``bench_faults.py``);
or ``--releases``: detection power on real bugs, older releases judged by a newer one (``bench_releases.py``)."""
from __future__ import annotations

import argparse
import json

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "bench"
HELP = ("naive path vs fast path: per-case latency, cases/min, peak memory (or --at-once: engines started together; "
        "--faults, --releases: detection power on injected faults, on older releases' real bugs)")
EXITS = {0: "measured", 1: "--at-once: an engine failed to start"}


def counts(text: str) -> list[int]:
    """--at-once: '8,16' -> [8, 16]; ',' or '0' would start nothing and still exit 0."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected counts like 8,16; got {text!r}")
    return values


def add_arguments(p) -> None:
    p.add_argument("--repeat", type=options.positive_int, default=3, help="runs of each fixed case on the fast paths")
    p.add_argument("--naive-repeat", type=options.positive_int, default=1, help="runs of each fixed case on the naive path")
    p.add_argument("--workers", type=options.positive_int, default=2, help="engines at once for the parallel fast path")
    p.add_argument("--skip-naive", action="store_true")
    options.add_timeout(p, 600.0)
    p.add_argument("--at-once", type=counts, help="instead: start this many engines at the same moment (e.g. 8,16) and report start-up failures")
    from hybridfuzz.cli import bench_faults

    bench_faults.add_arguments(p)
    from hybridfuzz.cli import bench_releases

    bench_releases.add_arguments(p)
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz.bench.speed import bench_cases, run_path
    from hybridfuzz.engines.forkserver import ForkServer
    from hybridfuzz.engines.subprocess_host import SubprocessHost
    from hybridfuzz.vllm_facts import vllm_version

    if args.at_once:
        return _at_once(args)
    if args.faults and (args.releases or args.sites):
        raise UsageError("--faults and --releases are two benches: give one")
    if args.releases or args.sites:
        from hybridfuzz.cli import bench_releases

        return bench_releases.run(args)
    if args.faults:
        from hybridfuzz.cli import bench_faults

        return bench_faults.run(args)
    cases = bench_cases()
    results = []
    if not args.skip_naive:
        with SubprocessHost(timeout=args.timeout) as host:
            results.append(run_path("naive (new process + default vllm.LLM per case)", host, cases, args.naive_repeat))
    # run_path starts each fork server itself, so its start-up shows as "setup".
    for workers, parallel in ((1, False), (args.workers, True)):
        host = ForkServer(workers=workers, timeout=args.timeout)
        try:
            label = "fast (fork server, 1 engine at a time)" if workers == 1 else f"fast (fork server, {workers} engines at once)"
            results.append(run_path(label, host, cases, args.repeat, parallel=parallel))
        finally:
            host.close()
    rows = [r.summary() for r in results]
    report = {"vllm": vllm_version(), "cases": len(cases), "paths": rows}
    if not args.skip_naive:
        naive, fast = rows[0], rows[1]
        report["latency_ratio_naive_over_fast"] = round(naive["median_s"] / fast["median_s"], 1)
        per_case = {i: {r["verdicts"][j] for r in rows for j in range(i, len(r["verdicts"]), len(cases))} for i in range(len(cases))}
        report["verdicts_identical"] = all(len(v) == 1 for v in per_case.values())
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"hybridfuzz bench: {len(cases)} fixed cases, vLLM {report['vllm']}")
    print(f"{'path':52} {'n':>3} {'median':>8} {'p90':>8} {'cases/min':>10} {'setup':>7} {'peak RSS':>9}")
    for r in rows:
        print(f"{r['path']:52} {r['cases']:>3} {r['median_s']:>7.2f}s {r['p90_s']:>7.2f}s {r['cases_per_min']:>10} {r['setup_s']:>6.1f}s {r['peak_rss_mb']:>6} MB")
    if "latency_ratio_naive_over_fast" in report:
        print(f"median latency naive/fast: {report['latency_ratio_naive_over_fast']}x; verdicts identical on both paths: {report['verdicts_identical']}")
    return 0


def _at_once(args) -> int:
    """Engines started at the same moment, for each requested count: do they all come up?"""
    from hybridfuzz.bench.speed import engines_at_once

    counts = args.at_once
    rows = [engines_at_once(n, args.timeout) for n in counts]
    report = {"env": environment_without_cuda(), "mode": "engines at once", "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"hybridfuzz bench --at-once: vLLM {report['env']['vllm']}, {report['env']['device']}")
        print(f"{'engines':>7} {'ok':>4} {'pass':>4} {'start med':>9} {'start max':>9} {'wall':>7} {'cases/min':>9} {'peak RSS':>9} {'peak GPU':>9}")
        for r in rows:
            print(f"{r['engines']:>7} {r['ok']:>4} {r['passed']:>4} {r['startup_median_s'] or 0:>8.1f}s {r['startup_max_s'] or 0:>8.1f}s "
                  f"{r['wall_s']:>6.1f}s {r['cases_per_min']:>9} {r['peak_rss_mb']:>6} MB {r['peak_gpu_mb']:>6} MB")
            for f in r["failures"]:
                print(f"    {f}")
    return 0 if all(r["ok"] == r["engines"] for r in rows) else 1


def environment_without_cuda() -> dict:
    """vLLM/torch versions and the device name, read without creating a CUDA context here."""
    import shutil
    import subprocess

    import torch

    from hybridfuzz.vllm_facts import vllm_version

    device = "cpu"
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout
        device = ", ".join(x.strip() for x in out.splitlines() if x.strip()) or "cpu"
    return {"vllm": vllm_version(), "torch": torch.__version__, "device": device}
