"""How many refused cases of the committed H200 campaigns were a named backend with a KV dtype it does not take
(vLLM's reason "kv_cache_dtype not supported" alone), which the strategies no longer draw (2026-12-02).

    python3 results/cpu-2026-12-02-s15/refusal-pairs.py
"""
import glob
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
for path in sorted(glob.glob(os.path.join(here, "..", "gpu-h200-2026-12-01-s1[24]", "c*", "summary.json"))):
    s = json.load(open(path))
    refused = s.get("refusals", {})
    pairs = sum(n for why, n in refused.items() if why.endswith("Reason: ['kv_cache_dtype not supported']"))
    print(f"{os.path.relpath(path, os.path.join(here, '..'))}: {s['cases']} cases, {s['engine_starts']} engine starts, "
          f"{sum(refused.values())} refused cases, {pairs} of them a backend named with a KV dtype it does not take; "
          f"{s.get('refusals_predicted', 0)} more foreseen by the outcome memory")
