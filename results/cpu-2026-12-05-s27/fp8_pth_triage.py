"""Triage of the two fp8_per_token_head reference divergences (s26 found/975e7575 NemotronH, da76dd31 Granite): each
case replayed on a fresh engine as found, then with kv_cache_dtype fp8 (per-tensor scales, the dtype the reference
tolerance QUANTIZED was calibrated on) and int8_per_token_head. Per-token-head scales quantise no worse than one
per-tensor scale, so a case that passes with fp8 and diverges with fp8_per_token_head points at the per-token-head
path. Output: fp8_pth_triage.jsonl beside this file. Run: python3 fp8_pth_triage.py CASE.yaml ..."""
import dataclasses
import json
import os
import sys

from hybridfuzz import _guard

_guard.install()
from hybridfuzz.case import load_case_file  # noqa: E402
from hybridfuzz.executor import replay  # noqa: E402
from hybridfuzz.hosts import make_host  # noqa: E402

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fp8_pth_triage.jsonl")
with make_host("forkserver", workers=2, warm=False) as host, open(out, "a") as f:
    for path in sys.argv[1:]:
        case = load_case_file(path).replace(observed=[])
        for kv in ("fp8_per_token_head", "fp8", "int8_per_token_head"):
            r = replay(case.replace(engine=dataclasses.replace(case.engine, kv_cache_dtype=kv)), host)
            row = {"file": os.path.basename(path), "family": case.model.architecture, "kv": kv,
                   "verdict": r.verdict.signature or r.verdict.status, "summary": r.verdict.summary,
                   "evidence": r.verdict.evidence[:3]}
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row)[:400], flush=True)
