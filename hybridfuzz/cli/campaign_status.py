"""``hybridfuzz campaign-status --dir DIR``: statistics of a campaign directory, live or finished."""
from __future__ import annotations

import dataclasses
import json
import os

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "campaign-status"
HELP = "aggregate statistics of a campaign directory (live or finished; every host with --redis)"
EXITS = {0: "printed"}


def add_arguments(p) -> None:
    p.add_argument("--dir", required=True, help="the campaign directory")
    p.add_argument("--redis", help="also read the findings every host shared through this Redis")
    p.add_argument("--shared", action="store_true",
                   help="also list case features that a class of findings shares beyond chance (base rates from the run's cases)")
    p.add_argument("--noise", action="store_true",
                   help="also list how far repeated requests drifted, per case feature (the data a GPU tolerance is calibrated from), "
                        "and apart those computed on the same schedule (held exact)")
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz.campaign.database import redis_client
    from hybridfuzz.campaign.state import FindingStore
    from hybridfuzz.campaign.stats import aggregate

    if not os.path.isdir(args.dir):
        raise UsageError(f"--dir {args.dir}: {'not a directory' if os.path.exists(args.dir) else 'no such directory'}")
    if not os.path.exists(os.path.join(args.dir, "campaign.json")):
        raise UsageError(f"--dir {args.dir}: not a campaign directory (no campaign.json)")
    client = None
    if args.redis:
        from hybridfuzz.cli.campaign import check_redis

        check_redis(args.redis)
        client = redis_client(args.redis)
    s = aggregate(args.dir, store=FindingStore(args.dir, client))
    if args.shared:
        from hybridfuzz.triage import shared_features

        s["shared_features"] = shared_features.summary(args.dir)
    if args.noise:
        from hybridfuzz.bench.noise import drift_floor

        floor, exact_floor = drift_floor(args.dir), drift_floor(args.dir, "exact_drift")
        ref_drift, ref_margin = drift_floor(args.dir, "reference_drift"), drift_floor(args.dir, "reference_margin")
        s["drift_floor"] = [dataclasses.asdict(f) for f in floor]
        s["exact_drift_floor"] = [dataclasses.asdict(f) for f in exact_floor]
        s["reference_drift_floor"] = [dataclasses.asdict(f) for f in ref_drift]
        s["reference_margin_floor"] = [dataclasses.asdict(f) for f in ref_margin]
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{s['dir']}: {s['cases']} cases in {s['spent_s']}s ({s['cases_per_min']}/min), {s['findings']} reported, "
          f"{s['findings_open']} open, {s['flaky']} flaky, {s.get('known_class', 0)} of known KV-dtype classes, restarts {s['restarts']}")
    for i, w in s["per_worker"].items():
        print(f"  worker {i}: {w['cases']} cases ({w['shrink_cases']} shrinking), {w['starts']} start(s), last phase {w['last_phase']}")
    for f in s["finding_list"]:
        print(f"  [{f['state']}] {f['signature']}: {f['path']}")
    if args.shared:
        for line in shared_features.lines(s["shared_features"]):
            print(line)
    if args.noise:
        print("repeat drift per case feature:" if floor else "repeat drift: no case of this run recorded one (events before it existed)")
        for f in floor:
            print(f"  {f.line()}")
        if exact_floor:  # files written before 2026-12-03 have none
            print("same-schedule repeats (held exact), drift per case feature:")
            for f in exact_floor:
                print(f"  {f.line()}")
        for title, rows in (("against the reference engine, drift before a first flip", ref_drift),
                            ("against the reference engine, flip margin where a token flipped (inf: outside the top-k)", ref_margin)):
            if rows:  # files written before 2026-12-04 have none
                print(f"{title}, per case feature:")
                for f in rows:
                    print(f"  {f.line()}")
    return 0
