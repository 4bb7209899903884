"""Options several commands share, defined once: host, timeout, --json, budget, narrowing,
engine-case limits, known-signature directories; and the checks on paths given to them."""
from __future__ import annotations

import argparse
import os
import re

from hybridfuzz.campaign.config import EngineUse, Narrowing
from hybridfuzz.cli.errors import UsageError
from hybridfuzz.hosts import HOSTS
from hybridfuzz.triage.findings import corpus_dirs


def parse_duration(text: str) -> float:
    """'90s', '20m', '2h' or plain seconds -> seconds; ValueError with the accepted forms otherwise."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", str(text).strip())
    if not m:
        raise ValueError(f"expected e.g. 90s, 20m or 2h; got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None


def positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def count(text: str) -> int:
    """A whole number, 0 allowed (0 = choose for me)."""
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative; got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds; got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds; got {text!r}")
    return value


def share(text: str) -> float:
    """A fraction in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.25; got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1; got {text!r}")
    return value


def add_budget(p, default: str, what: str = "wall-clock budget") -> None:
    p.add_argument("--budget", type=_duration, default=parse_duration(default), metavar="DURATION",
                   help=f"{what}, e.g. 90s, 20m, 2h (default {default})")


def add_host(p, hosts: tuple[str, ...] = HOSTS) -> None:
    p.add_argument("--host", default="forkserver", choices=list(hosts),
                   help="forkserver: fast, isolated (default); subprocess: a plain new process with vLLM defaults; server: vllm serve")


def add_timeout(p, default: float = 300.0) -> None:
    p.add_argument("--timeout", type=seconds, default=default, help=f"seconds per engine run before it counts as a hang (default {default:g})")


def add_json(p) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")


def add_known(p) -> None:
    p.add_argument("--known", action="append", metavar="DIR",
                   help="directory of cases whose signatures are already known (repeatable; default in a checkout: ./corpus)")


def add_case_limits(p) -> None:
    p.add_argument("--max-layers", type=positive_int, default=8, help="most layers in a generated model (default 8)")
    gpu, cpu = EngineUse().resolved("cuda"), EngineUse().resolved("cpu")
    p.add_argument("--max-steps", type=positive_int, default=0,
                   help=f"most steps in a generated script (default: {gpu.max_steps} on GPU, {cpu.max_steps} on CPU)")


def add_narrowing(p) -> None:
    p.add_argument("--kv-dtypes", help="only these KV dtypes (comma-separated; 'auto' stays the reference), e.g. fp8,fp8_e5m2")
    p.add_argument("--attention-backends", help="only these attention backends (comma-separated), e.g. TRITON_ATTN")
    p.add_argument("--eager-only", action="store_true", help="never capture CUDA graphs (much faster cases on GPU)")
    p.add_argument("--families", help="only these model families (comma-separated), e.g. qwen3_next")
    p.add_argument("--dimensions", help="only cases with one of these new dimensions (comma-separated): spec_decode, "
                                        "preemption, async_scheduling, arrivals (with aborts)")
    p.add_argument("--torch-compile", action="store_true",
                   help="also draw CUDA-graph cases through torch.compile (vLLM's default graph path; about a minute per new model). "
                        "Without it, graph cases capture full decode graphs without compile")


def add_engine_use(p) -> None:
    gpu, cpu = EngineUse().resolved("cuda"), EngineUse().resolved("cpu")
    p.add_argument("--cases-per-engine", type=count, default=0,
                   help=f"persistent mode: up to N cases share one warm engine, findings confirmed on a fresh one "
                        f"(default: {gpu.cases_per_engine} on GPU, {cpu.cases_per_engine} on CPU)")
    p.add_argument("--shrink", choices=["inline", "background"], default="",
                   help="inline: Hypothesis shrinks each finding before searching on; background: shrink on spare engines while the search goes on (default: background on GPU, inline on CPU)")
    p.add_argument("--shrink-parallel", type=count, default=0,
                   help="background shrinking: variants at once in one shrink (default on GPU: from the plan line printed at start)")


def engine_use_of(args):
    return EngineUse(getattr(args, "cases_per_engine", 0) or 0, getattr(args, "shrink", "") or "", getattr(args, "shrink_parallel", 0) or 0,
                     getattr(args, "max_steps", 0) or 0)


def narrowing_of(args) -> Narrowing:
    return Narrowing(kv_dtypes=getattr(args, "kv_dtypes", None), attention_backends=getattr(args, "attention_backends", None),
                     eager_only=bool(getattr(args, "eager_only", False)), families=getattr(args, "families", None),
                     torch_compile=bool(getattr(args, "torch_compile", False)), dimensions=getattr(args, "dimensions", None))


def narrow_platform(platform, args):
    """The platform narrowed by --kv-dtypes, --attention-backends and --eager-only; a value not offered -> exit 2."""
    try:
        return narrowing_of(args).apply(platform)
    except ValueError as e:
        raise UsageError(str(e)) from None


# ---------------------------------------------------------------- paths

def known_dirs(known: list[str] | None) -> tuple[str, ...]:
    """``--known`` as given (each must be a directory); without it, in a checkout (./corpus exists), the whole
    corpus: a bug already filed is neither reported nor shrunk again, and the outcome memory learns its stops
    like any other. ``fuzz`` and ``campaign`` both take their known set from here."""
    if known is not None:
        return existing_dirs("--known", known)
    return corpus_dirs()


def existing_dirs(option: str, paths: list[str] | None) -> tuple[str, ...]:
    for p in paths or ():
        if not os.path.isdir(p):
            raise UsageError(f"{option} {p}: {'not a directory' if os.path.exists(p) else 'no such directory'}")
    return tuple(paths or ())


def dir_to_write(option: str, path: str | None) -> None:
    """A directory the command will create or reuse: it must not be a file, and its parent must be writable."""
    if not path:
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: cannot create it under {parent}")


def file_to_write(option: str, path: str | None) -> None:
    if not path:
        return
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: no directory {parent}")
