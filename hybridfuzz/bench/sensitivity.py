"""Per-oracle sensitivity to a graded fault (issue #16, item 3): the smallest corruption each oracle sees.

``python -m hybridfuzz.bench.sensitivity FAULT CASE.yaml [CASE.yaml ...] --severities 1,0.1,0.01 --out F.json``
runs each case under ``FAULT:severity`` (one fork server per severity, the fault set for it)
and judges each run three ways, with one oracle at a time on the same traces: health alone,
health + self-consistency, health + reference. A row per (severity, case, oracle): detected
or not. ``threshold`` per oracle is the smallest severity it detected on any case, and
``monotone`` says whether every larger severity was detected too.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass

ORACLES = ("health", "self_consistency", "reference")


@dataclass
class Point:
    severity: float
    case: str
    oracle: str
    detected: bool
    signature: str


def judge_each(case, result) -> dict[str, tuple[bool, str]]:
    """One verdict per oracle on the traces already run (health is always checked first)."""
    from hybridfuzz.executor import judge

    out = {}
    for oracle in ORACLES:
        checks = ["health"] if oracle == "health" else ["health", oracle]
        one = case.replace(oracle=dataclasses.replace(case.oracle, checks=checks))
        v = judge(one, result.trace, result.reference if oracle == "reference" else None)
        out[oracle] = (v.status == "divergence", v.signature or "")
    return out


def curve(fault: str, paths: list[str], severities: list[float], timeout: float = 300.0) -> list[Point]:
    from hybridfuzz.case import load_case_file
    from hybridfuzz.executor import evaluate
    from hybridfuzz.hosts import make_host

    points = []
    for sev in severities:
        os.environ["HYBRIDFUZZ_FAULT"] = f"{fault}:{sev:g}"
        with make_host("forkserver", workers=2, timeout=timeout, warm=False) as host:
            for path in paths:
                case = load_case_file(path)
                result = evaluate(case, host, timeout)
                for oracle, (hit, sig) in judge_each(case, result).items():
                    points.append(Point(sev, os.path.basename(path), oracle, hit, sig))
                    print(f"{fault}:{sev:g} {os.path.basename(path)} {oracle}: {'DETECTED' if hit else 'missed'} {sig}", file=sys.stderr, flush=True)
    os.environ.pop("HYBRIDFUZZ_FAULT", None)
    return points


def thresholds(points: list[Point]) -> dict[str, dict]:
    out = {}
    for oracle in ORACLES:
        mine = [p for p in points if p.oracle == oracle]
        hit = sorted({p.severity for p in mine if p.detected})
        sevs = sorted({p.severity for p in mine})
        smallest = hit[0] if hit else None
        out[oracle] = {"threshold": smallest,
                       "monotone": smallest is None or all(s in hit for s in sevs if s >= smallest)}
    return out


def main(argv: list[str] | None = None) -> int:
    from hybridfuzz import _guard

    _guard.install()
    ap = argparse.ArgumentParser(prog="python -m hybridfuzz.bench.sensitivity", description=__doc__.splitlines()[0])
    ap.add_argument("fault")
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--severities", default="1,0.3,0.1,0.03,0.01")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    from hybridfuzz.faults import names
    from hybridfuzz.store import write_atomic
    from hybridfuzz.vllm_facts import vllm_version

    if a.fault not in names():
        print(f"hybridfuzz sensitivity: unknown fault {a.fault!r} (known: {', '.join(names())})", file=sys.stderr)
        return 2
    t0 = time.time()
    points = curve(a.fault, a.cases, [float(x) for x in a.severities.split(",")])
    report = {"fault": a.fault, "vllm": vllm_version(), "machine": f"{os.cpu_count()} CPU cores", "cases": a.cases,
              "date": time.strftime("%Y-%m-%d"), "seconds": round(time.time() - t0), "thresholds": thresholds(points),
              "points": [dataclasses.asdict(p) for p in points]}
    write_atomic(a.out, json.dumps(report, indent=2))
    print(json.dumps(report["thresholds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
