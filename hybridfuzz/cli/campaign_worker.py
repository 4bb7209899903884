"""``hybridfuzz campaign-worker`` (internal, hidden from --help): one worker, started by ``campaign``."""
from __future__ import annotations

from hybridfuzz.cli.campaign import add_worker_options, settings_of
from hybridfuzz.cli.errors import UsageError

NAME = "campaign-worker"
HELP = None  # internal
EXITS = {0: "the worker ran until its deadline or SIGTERM"}


def add_arguments(p) -> None:
    add_worker_options(p)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--until", type=float, required=True, help="stop at this time (seconds since the epoch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--platform-file", help="the platform the supervisor detected (campaign/supervisor.py); without it the worker detects its own")
    p.add_argument("--tensor-parallel", type=int, choices=[1, 2], default=0,
                   help="draw only cases of this tensor-parallel size, on the GPUs CUDA_VISIBLE_DEVICES pins (campaign/placement.py)")


def run(args) -> int:
    from hybridfuzz.campaign.worker import load_platform, run_worker

    platform = None
    if args.platform_file:
        try:
            platform = load_platform(args.platform_file)
        except ValueError as e:
            raise UsageError(f"--platform-file {e}") from None
    return run_worker(args.dir, args.index, args.until, args.seed, settings_of(args), platform, args.platform_file or "",
                      args.tensor_parallel)
