"""Triage of README command (a)'s findings on an AVX-512/AMX CPU (s26): replay each on a fresh engine as found, and
again with kv_cache_dtype auto. A finding that reproduces and passes under auto is caused by its KV dtype. Output:
one JSON line per finding, to kv_auto_control.jsonl beside this file. Run: python3 kv_auto_control.py FOUND_DIR"""
import dataclasses
import glob
import json
import os
import sys

from hybridfuzz.case import load_case_file
from hybridfuzz.executor import replay
from hybridfuzz.hosts import make_host

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kv_auto_control.jsonl")
with make_host("forkserver", workers=2, warm=False) as host, open(out, "w") as f:
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
        case = load_case_file(path)
        found = case.observed[-1].signature
        again = replay(case, host)
        auto = replay(case.replace(engine=dataclasses.replace(case.engine, kv_cache_dtype="auto")), host)
        row = {"file": os.path.basename(path), "family": case.model.architecture, "kv": case.engine.kv_cache_dtype,
               "found": found, "replay": again.verdict.signature or again.verdict.status,
               "kv_auto": auto.verdict.signature or auto.verdict.status}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(row, flush=True)
