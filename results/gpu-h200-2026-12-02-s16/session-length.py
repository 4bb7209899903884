"""Per-session time of an H200 campaign from its workers' events: the sessions' first engine starts, restarts
after a case stopped its engine, and the cases' own time. Prints what a session of twice or three times as many
cases would cost per case, the estimate behind GPU_CASES_PER_ENGINE (hybridfuzz/campaign/config.py).

    python3 results/gpu-h200-2026-12-02-s16/session-length.py results/gpu-h200-2026-12-01-s14/c32 [...]
"""
import collections
import glob
import json
import sys

for d in sys.argv[1:]:
    first = restarts = case_time = cases = sessions = 0
    for f in glob.glob(f"{d}/workers/*/events.jsonl"):
        by_session = collections.defaultdict(list)
        for line in open(f):
            e = json.loads(line)
            by_session[(e["session_s"], e["phase"])].append(e)
        for (session_s, _), es in by_session.items():
            f0 = es[0].get("startup_s", 0)
            rest = sum(e.get("startup_s", 0) for e in es[1:])
            first, restarts, case_time = first + f0, restarts + rest, case_time + session_s - f0 - rest
            cases, sessions = cases + len(es), sessions + 1
    base = (first + restarts + case_time) / cases
    print(f"{d}: {sessions} sessions, {cases} cases; first engine starts {first:.0f} s, restarts {restarts:.0f} s, "
          f"cases {case_time:.0f} s ({case_time / cases:.2f} s a case); {base:.2f} s of session time a case")
    for m in (2, 3):
        per = (first / m + restarts + case_time) / cases
        print(f"  x{m} cases a session: {per:.2f} s a case ({100 * (base / per - 1):.0f} % more cases in the same time)")
