"""How far repeated requests drift with and without online fp8 weights, from the events of three default H200
campaigns (each case's largest drift of a repeated request, `repeat_drift`, and the same over pairs on the same
schedule, `exact_drift`; campaign/records.py CaseEvent). The figures behind oracles/consistency.py BATCH_SCALES.

    python3 results/calibration-fp8-weights-batch-2026-12-04/drift_by_weights.py
"""
import glob
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNS = ["gpu-h200-2026-12-03-s20/res/c32", "gpu-h200-2026-12-03-s21/res/c33", "gpu-h200-2026-12-04-s22/res/c33"]


def events():
    for run in RUNS:
        for path in glob.glob(os.path.join(ROOT, "results", run, "workers", "*", "events.jsonl")):
            for line in open(path):
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("repeat_drift") is not None:
                    yield e


def main() -> None:
    rows = list(events())
    for weights in ("fp8", "none"):
        for per_token_head in (False, True):
            sel = [e for e in rows if e["weights"] == weights and ("per_token_head" in e["kv_cache_dtype"]) == per_token_head]
            other = sorted(e["repeat_drift"] for e in sel)
            same = [e["exact_drift"] for e in sel if e.get("exact_drift") is not None]
            print(f"weights={weights} per-token-head KV={per_token_head}: {len(other)} cases with a repeat, "
                  f"{sum(x > 0.25 for x in other)} over 0.25 nats, max {max(other, default=0):.2f}; "
                  f"same schedule: {len(same)} cases, {sum(x > 0 for x in same)} drifted at all")


if __name__ == "__main__":
    main()
