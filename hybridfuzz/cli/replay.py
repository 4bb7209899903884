"""``hybridfuzz replay CASE.yaml``: run one case, apply its oracle, print the verdict."""
from __future__ import annotations

import json

from hybridfuzz.cli import options

NAME = "replay"
HELP = "run one YAML case, apply its oracle, print the verdict (exit 0 pass, 1 divergence, 2 invalid, 3 unsupported)"
EXITS = {0: "pass", 1: "divergence reproduced", 3: "this machine cannot run it (the engine refused the configuration)"}


def add_arguments(p) -> None:
    p.add_argument("case", help="a YAML case file")
    options.add_host(p)
    options.add_timeout(p)
    options.add_json(p)
    p.add_argument("--record", action="store_true", help="append this run's observation (vLLM version, verdict) to the case file")
    p.add_argument("--runs", type=options.positive_int, default=1,
                   help="replay on this many fresh engines; prints (and --record writes) the reproduction rate, every symptom seen and the CPU's ISA class")


def uses_cached_tokens(case) -> bool:
    """The prefix-cache check reads each request's cached-token count (it runs with ``prefix_cache`` or
    ``self_consistency``), so replay shows those counts."""
    return case is not None and bool({"prefix_cache", "self_consistency"} & set(case.oracle.checks))


def print_result(case_path: str, result, as_json: bool, observation=None, case=None) -> None:
    """``observation``: what ``--runs N`` (N > 1) saw over all its runs; JSON then carries the rate beside the one
    run it shows (on the H200 of 2026-12-04 the rate of five `replay --runs 2 --json` went only to the exit code)."""
    v = result.verdict
    if as_json:
        out = {"case": case_path, "status": v.status, "oracle": v.oracle, "summary": v.summary,
               "signature": v.signature, "evidence": v.evidence, "engine_settings": result.trace.engine_settings,
               "timings": result.trace.timings, "env": result.trace.env}
        if uses_cached_tokens(case):
            out["cached_tokens"] = {str(idx): [o.num_cached_tokens for o in outputs] for idx, outputs in result.trace.generate_results()}
        if observation is not None:
            out.update(runs=observation.runs, reproduced=observation.reproductions, symptoms=observation.symptoms,
                       signature_runs=observation.signature_runs)
        print(json.dumps(out, indent=2))
        return
    print(v.one_line())
    for line in v.evidence:
        print("  " + line.replace("\n", "\n  "))
    s = result.trace.engine_settings
    if s:
        print("  engine: " + ", ".join(f"{k}={x}" for k, x in s.items()))
    if uses_cached_tokens(case):
        for idx, outputs in result.trace.generate_results():
            print(f"  step {idx}: cached prompt tokens per request: {[o.num_cached_tokens for o in outputs]}")
    t = result.trace.timings
    if t:
        print("  timings: " + ", ".join(f"{k}={x:.2f}s" for k, x in t.items()))


def run(args) -> int:
    from hybridfuzz.case import dump_case, load_case_file
    from hybridfuzz.triage.findings import with_observation
    from hybridfuzz.triage.reproduce import rate_text, reproduce
    from hybridfuzz.hosts import make_host
    from hybridfuzz.store import write_atomic

    case = load_case_file(args.case)
    if args.record:
        options.file_to_write("--record", args.case)
    with make_host(args.host, workers=2, timeout=args.timeout, warm=False) as host:
        obs, results = reproduce(case, host, args.runs, args.timeout)
    result = next((r for r in results if obs.signature and r.verdict.signature == obs.signature), results[-1])
    print_result(args.case, result, args.json, obs if args.runs > 1 else None, case)
    if args.runs > 1 and not args.json:
        print(f"  {rate_text(obs)}" + (f" (on {obs.isa})" if obs.isa else ""))
    if args.record:
        write_atomic(args.case, dump_case(with_observation(case, obs)))
    return 1 if obs.verdict == "divergence" else result.verdict.exit_code
