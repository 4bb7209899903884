#!/usr/bin/env python3
"""Why case engines ended early in a campaign made before `engine_ends` existed: from workers/*/events.jsonl.
Usage: engine-ends.py CAMPAIGN_DIR. A session is the cases with the same session_s, seconds and family; a case
after the first with startup_s > 0 ran on a fresh engine, so the case before it ended its engine."""
import collections
import glob
import json
import sys

starts = first = 0
before = collections.Counter()
sessions = cases = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/workers/*/events.jsonl")):
    groups: dict = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            e = json.loads(line)
            if e.get("phase") == "generate":
                groups.setdefault((e.get("session_s"), e.get("seconds"), e.get("family")), []).append(e)
    for group in groups.values():
        sessions += 1
        for i, e in enumerate(group):
            cases += 1
            if e.get("startup_s", 0) > 0:
                starts += 1
                if i == 0:
                    first += 1
                else:
                    prev = group[i - 1]
                    before[f"{prev['status']}{' (slept)' if 'sleep' in prev['steps'] else ''}"] += 1
print(json.dumps({"sessions": sessions, "cases": cases, "fresh_case_engines": starts, "first_of_session": first,
                  "after": dict(before.most_common())}, indent=1))
