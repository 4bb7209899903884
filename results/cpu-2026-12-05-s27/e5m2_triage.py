"""Triage of the engine fuzz target's CI failure of 2026-12-05 (LFM2, fp8_e5m2 KV, reference: degenerate output) on a
warm fork server (the fuzz target's host) and a cold one, with the KV dtypes fp8_e5m2, fp8_e4m3 and float16.
Run: python3 e5m2_triage.py CASE.yaml"""
import dataclasses
import sys

from hybridfuzz import _guard

_guard.install()
from hybridfuzz.case import load_case_file  # noqa: E402
from hybridfuzz.executor import evaluate  # noqa: E402
from hybridfuzz.hosts import make_host  # noqa: E402

case = load_case_file(sys.argv[1])
for warm in (True, False):
    with make_host("forkserver", workers=2, warm=warm) as host:
        for kv in ("fp8_e5m2", "fp8_e4m3", "float16"):
            r = evaluate(case.replace(engine=dataclasses.replace(case.engine, kv_cache_dtype=kv)), host)
            print(f"warm={warm} kv={kv}: {r.verdict.signature or r.verdict.status} | {r.verdict.summary[:110]} |",
                  " ".join(r.verdict.evidence[:2])[:160], flush=True)
