"""``hybridfuzz fuzz``: a bounded campaign in one process, with progress lines and a summary."""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
import time

from hybridfuzz.campaign.config import FuzzConfig
from hybridfuzz.campaign.counting import shrink_share
from hybridfuzz.cli import options
from hybridfuzz.cli.campaign import dimensions_line
from hybridfuzz.cli.errors import FOUND, INTERRUPTED, OK, UNSUPPORTED, UsageError
from hybridfuzz.triage.findings import in_checkout

NAME = "fuzz"
HELP = "run a bounded fuzz campaign (exit 1 when it found something new)"
EXITS = {0: "nothing new found", 1: "something new was found (minimal cases written)", 3: "--engine gpu on a machine without a CUDA vLLM"}


def add_arguments(p) -> None:
    p.add_argument("--engine", default="cpu", choices=["cpu", "gpu"], help="which vLLM the cases target (the installed one)")
    options.add_budget(p, "20m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="run directory (summary.json, events.jsonl, hypothesis-db); default runs/fuzz-<time>")
    p.add_argument("--findings", help="where minimal YAML cases go (default corpus/found in a checkout, else OUT/findings)")
    options.add_known(p)
    options.add_host(p)
    p.add_argument("--workers", type=options.count, default=0, help="engines at once (default: 2 on CPU, 8 on GPU)")
    options.add_timeout(p)
    options.add_narrowing(p)
    options.add_case_limits(p)
    options.add_engine_use(p)
    p.add_argument("--shrink-share", type=options.share, default=FuzzConfig.shrink_share_cap, metavar="FRACTION",
                   help="inline shrinking stops once this share of the budget went to it; later findings are reported "
                        f"unshrunk (default {FuzzConfig.shrink_share_cap}; 1: shrink each finding fully)")
    options.add_json(p)


def _one_gpu_campaign(args, out: str, known: tuple[str, ...], say) -> int:
    """On a GPU, ``fuzz`` is a campaign of this host's GPUs (many workers per GPU, issue #12):
    the same throughput as ``campaign --engine gpu``; findings in OUT/findings."""
    from hybridfuzz.campaign.config import WorkerSettings
    from hybridfuzz.campaign.supervisor import CampaignSupervisor
    from hybridfuzz.campaign.stats import host_lost_line

    settings = WorkerSettings(timeout_s=args.timeout, known_dirs=known, max_layers=args.max_layers,
                              narrowing=options.narrowing_of(args), use=options.engine_use_of(args))
    s = CampaignSupervisor(out, args.budget, engine="gpu", seed=args.seed, settings=settings, log=say).run()
    if args.json:
        print(json.dumps(s, indent=2))
    say(f"{'interrupted' if s['interrupted'] else 'done'}: {s['cases']} cases in {s['spent_s']}s ({s['cases_per_min']}/min, "
        f"{'n/a' if s['cases_per_min_after_first'] is None else s['cases_per_min_after_first']}/min after the first case, "
        f"{s['steps_per_min']} steps/min, {s['engine_starts_per_min']} engine starts/min, engines busy {s['engine_busy_fraction']}); "
        f"{s['findings']} findings reported, {s['findings_open']} open, {s['flaky']} flaky, {s.get('known_class', 0)} of known KV-dtype classes; refused by reason: {s['refusals'] or 'none'}, "
        f"{s['refusals_predicted']} more foreseen refused; {s['known_avoided']} cases left out (a known bug foreseen)")
    for f in s["finding_list"]:
        say(f"  [{f['state']}] {f['signature']}: {f['path']}\n    {f['summary']}")
    if lost := host_lost_line(s["workers_host_lost"], s["workers"]):
        say(lost)
    if s["interrupted"]:
        return INTERRUPTED
    return FOUND if s["findings"] else OK


def _seconds(value) -> str:
    return "none" if value is None else f"{value}s"


def run(args) -> int:
    from hybridfuzz.campaign.loop import FuzzLoop
    from hybridfuzz.triage.ledger import ledger_of
    from hybridfuzz.campaign.stats import host_lost_line
    from hybridfuzz.hosts import make_host
    from hybridfuzz.strategies import detect_platform

    out = args.out or os.path.join("runs", datetime.datetime.now().strftime("fuzz-%Y%m%d-%H%M%S"))
    # In a checkout (./corpus exists) minimal cases go to corpus/found and every corpus case's
    # signature counts as known, so a bug already in the corpus is not shrunk again.
    findings = args.findings or (os.path.join("corpus", "found") if in_checkout() else os.path.join(out, "findings"))
    known = options.known_dirs(args.known)
    options.dir_to_write("--out", out)
    options.dir_to_write("--findings", findings)
    platform = options.narrow_platform(detect_platform(), args)
    if args.engine == "gpu" and platform.device != "cuda":
        raise UsageError("--engine gpu: this machine's vLLM has no CUDA device", UNSUPPORTED)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    if args.engine == "gpu" and not args.workers:
        return _one_gpu_campaign(args, out, known, say)
    say(f"hybridfuzz fuzz: engine {platform.device}, budget {args.budget:.0f}s, seed {args.seed}, out {out}, findings {findings}")
    last = [0.0]

    def progress(stats, phase):
        now = time.time()
        if now - last[0] > 5 or phase == "shrink":
            last[0] = now
            elapsed = max(now - stats.started, 1e-9)
            refinds = len(stats.known_bug) + len(stats.known_class)
            say(f"  [{elapsed:6.0f}s] {phase:8} cases {stats.cases:4} ({stats.cases / elapsed * 60:.1f}/min)  new {len(stats.findings)}"
                f"  re-finds {refinds}  shrinking {shrink_share(stats, elapsed):.0%}")

    workers = args.workers or (2 if platform.device == "cpu" else 8)
    from hybridfuzz.hosts import PERSISTENT

    use = options.engine_use_of(args).resolved(platform.device, persistent=args.host in PERSISTENT)
    cfg = FuzzConfig(budget_s=args.budget, out_dir=out, findings_dir=findings, seed=args.seed, timeout_s=args.timeout,
                     known_dirs=known, max_layers=args.max_layers, max_steps=use.max_steps, cases_per_engine=use.cases_per_engine,
                     shrink=use.shrink, shrink_parallel=use.shrink_parallel, engine_slots=workers,
                     memory_dir=os.path.join(out, "outcomes"), ledger=ledger_of(known), shrink_share_cap=args.shrink_share)
    loop = None
    try:
        with make_host(args.host, workers=workers, timeout=args.timeout) as host:
            loop = FuzzLoop(cfg, host, platform, progress)
            loop.run()
    except KeyboardInterrupt:
        if loop is None:
            raise
    summary = loop.summary()  # the loop wrote summary.json already (also when interrupted)
    if args.json:
        print(json.dumps(dataclasses.asdict(summary), indent=2))
    say(f"throughput: {summary.cases_per_min} cases/min, {summary.steps_per_min} steps/min, {summary.engine_starts_per_min} engine "
        f"starts/min, engines busy {summary.engine_busy_fraction}, warm engines given up by why: {summary.engine_ends or 'none'}; "
        f"cases passed as noise by control: {summary.noise_set_aside or 'none'}; refused by reason: {summary.refusals or 'none'}, "
        f"{summary.refusals_predicted} more foreseen refused; {summary.known_avoided} cases left out (a known bug foreseen)")
    met, known = summary.met_while_shrinking, summary.known_class
    say(f"{'interrupted' if summary.interrupted else 'done'}: {summary.cases} cases in {summary.elapsed_s}s; "
        f"{summary.findings} new findings{f' (and {len(met)} open: met while shrinking)' if met else ''}"
        f"{f', {len(known)} more of known KV-dtype classes' if known else ''}"
        f"{f', {len(summary.known_bug)} re-finds of ledger bugs' if summary.known_bug else ''}; "
        f"time to first finding {_seconds(summary.time_to_first_finding_s)}; shrinking {summary.shrink_s}s "
        f"({summary.shrink_share:.0%} of the run); not replayed {summary.not_replayed}")
    say(dimensions_line(dataclasses.asdict(summary)))
    for f in summary.finding_list:
        say(f"  {f.signature}: {f.path}\n    {f.summary}")
    if met:  # written as found, neither shrunk nor replayed; a later run reads them as known and leaves them so
        say(f"{len(met)} more new signatures met while shrinking another, written unshrunk and not replayed:")
        for f in met:
            say(f"  [open] {f.signature}: {f.path}\n    {f.summary}")
        say(f"shrink and replay them: hybridfuzz shrink {' '.join(f.path for f in met)}")
    if known:  # a KV-dtype class filed before, and the case passed with the auto KV cache (campaign/filing.py KnownFiling.of_known_class)
        say(f"{len(known)} more new signatures of KV-dtype classes filed before (each passed with kv_cache_dtype auto), "
            "written as found, not shrunk:")
        for f in known:
            say(f"  [known-class] {f.signature}: {f.path}\n    like {f.like}")
    for f in summary.known_bug:  # a ledger bug met again (campaign/filing.py KnownFiling.of_ledger_bug): a member, not shrunk
        say(f"  [known-bug {f.like}] {f.signature}: {f.path}")
    if lost := host_lost_line(int(summary.host_lost), 1):
        say(lost)
    say(f"summary: {os.path.join(out, 'summary.json')}")
    if summary.interrupted:
        return INTERRUPTED
    return FOUND if summary.findings or met else OK
