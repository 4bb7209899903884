"""``hybridfuzz bench``: per-case latency, cases/min and peak memory, naive vs fast path."""
from __future__ import annotations

import json


def cmd_bench(args) -> int:
    from hybridfuzz.bench import bench_cases, run_path
    from hybridfuzz.engines.forkserver import ForkServer
    from hybridfuzz.engines.subprocess_host import SubprocessHost
    from hybridfuzz.vllm_facts import vllm_version

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


def register(sub) -> None:
    b = sub.add_parser("bench", help="naive path vs fast path: per-case latency, cases/min, peak memory")
    b.add_argument("--repeat", type=int, default=3, help="runs of each fixed case on the fast paths")
    b.add_argument("--naive-repeat", type=int, default=1, help="runs of each fixed case on the naive path")
    b.add_argument("--workers", type=int, default=2, help="engines at once for the parallel fast path")
    b.add_argument("--skip-naive", action="store_true")
    b.add_argument("--timeout", type=float, default=600.0)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)
