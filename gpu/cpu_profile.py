"""Where a GPU campaign's CPU goes: a summary of a py-spy ``record --subprocesses --format raw`` profile.

On the H200 the campaign is CPU-bound (16 of 16 cores busy, results/2026-12-02-h200-vllm0.32.0-cuda-sync-block/), and wall times
under that load do not say which work is costly. py-spy samples only threads on a CPU (without ``--idle``), so the
sample counts are CPU time. Printed: samples by process kind, by stage of an engine's life (the first CATEGORY
whose pattern a stack holds), and the functions most often on the stack.

    python3 gpu/cpu_profile.py PROFILE.txt [--top 30] [--folded OUT.txt.gz]

``--folded`` also writes the profile small enough to commit: each stack as "[process kind];frames" without line
numbers, merged, those of at least FOLDED_MIN samples (a raw profile of a 10-minute H200 campaign: 9.7 MB
gzipped; folded: 0.3 MB, 72 % of its samples).
"""
from __future__ import annotations

import argparse
import collections
import re
import sys

# Stage of a stack: the first of these patterns that it holds, so an import inside start-up counts as an import
# (and one that compiles a module's source, because no .pyc was there to read, as that).
CATEGORIES = [
    ("import: compiling source (no .pyc)", r"source_to_code \(<frozen importlib"),
    ("import", r"<frozen importlib\._bootstrap"),
    ("triton autotune", r"triton/runtime/autotuner\.py"),
    ("triton compile", r"triton/(compiler|backends)/|triton/runtime/jit\.py:\d+\)?;?.*\bcompile\b"),
    ("torch.compile", r"torch/_dynamo/|torch/_inductor/"),
    ("cuda graph capture", r"capture_model|cudagraph|cuda_graph|CUDAGraph"),
    ("profile run", r"profile_run|_dummy_run|determine_available_memory"),
    ("load model", r"load_model|load_weights|initialize_from_config"),
    ("kv cache init", r"initialize_kv_cache|_initialize_kv_caches|init_device"),
    ("sleep/wake", r"\b(sleep|wake_up)\b|cumem"),
    ("engine step", r"execute_model|sample_tokens|\bstep \(vllm/|schedule \(vllm/"),
    ("hypothesis", r"hypothesis/"),
    ("oracles", r"oracles/"),
    ("engine set-up (other)", r"vllm/"),
]
# one process entry: its command line ends at the '";' before the next entry or the first frame ("name (file:line)")
_PROCESS_HEAD = re.compile(r'process \d+:"(.*?)"(?:;(?=process \d+:"|[^;]* \([^;]*\)(;|$))|$)', re.S)


def records(text: str):
    """(processes' command lines, frames, samples) of each raw line. The process entries come first, each
    'process PID:"COMMAND LINE"'; a command line may hold ';' and newlines (``python -c``)."""
    for chunk in re.split(r"\n(?=process \d+:\")", text.strip()):
        stack, _, count = chunk.rpartition(" ")
        if not count.strip().isdigit():
            continue
        cmds = []
        while True:
            m = _PROCESS_HEAD.match(stack)
            if not m:
                break
            cmds.append(m.group(1))
            stack = stack[m.end():]
        yield cmds, [f for f in stack.split(";") if f], int(count)


def process_kind(cmds: list[str], frames: list[str]) -> str:
    last = cmds[-1] if cmds else ""
    if "campaign-worker" in last:
        return "campaign worker"
    if " -c " in last and "hybridfuzz" not in last:
        return "python -c " + " ".join(last.split(" -c ", 1)[1].split()[:2]).split(";")[0][:60]
    if "hybridfuzz.engines.forkserver" in last:
        # the server forks its engines in serve(); a forked engine keeps the server's command line and runs _child()
        return "engine (forked)" if any(f.startswith("_child (hybridfuzz/engines/forkserver.py") for f in frames) else "fork server"
    if "EngineCore" in last or "spawn_main" in last:
        return "vLLM engine core process"
    if "compile_worker" in last or "_inductor" in last:
        return "inductor compile worker"
    if "hybridfuzz.cli campaign" in last:
        return "campaign supervisor"
    return (last.split(" -m ")[-1].split()[0] if " -m " in last else last[:60]) or "?"


def category(frames: list[str]) -> str:
    joined = ";".join(frames)
    for name, pattern in CATEGORIES:
        if re.search(pattern, joined):
            return name
    return "other"


FOLDED_MIN = 5


def _unnumbered(frame: str) -> str:
    """A frame without its line number: one function, wherever in it the sample fell."""
    return re.sub(r":\d+\)", ")", frame)


def fold(text: str, min_samples: int = FOLDED_MIN) -> str:
    """The ``--folded`` form: a header line, then "[kind];frame;frame N" per merged stack, most samples first."""
    merged: collections.Counter = collections.Counter()
    for cmds, frames, n in records(text):
        merged[f"[{process_kind(cmds, frames)}];" + ";".join(_unnumbered(f) for f in frames)] += n
    total = sum(merged.values())
    kept = [(stack, n) for stack, n in merged.most_common() if n >= min_samples]
    head = f"# py-spy raw profile folded by gpu/cpu_profile.py: stacks of >= {min_samples} samples, {sum(n for _, n in kept)} of {total}\n"
    return head + "".join(f"{stack} {n}\n" for stack, n in kept)


def summarize(text: str, top: int = 30) -> str:
    kinds, cats, inclusive, own = (collections.Counter() for _ in range(4))
    total = 0
    for cmds, frames, n in records(text):
        total += n
        kinds[process_kind(cmds, frames)] += n
        cats[category(frames)] += n
        for f in set(_unnumbered(f) for f in frames):
            inclusive[f] += n
        if frames:
            own[_unnumbered(frames[-1])] += n
    if not total:
        return "no samples"
    pct = lambda c: f"{100 * c / total:5.1f} %"  # noqa: E731
    out = [f"{total} samples (CPU time only)", "", "by process:"]
    out += [f"  {pct(c)}  {k}" for k, c in kinds.most_common()]
    out += ["", "by stage (first match of CATEGORIES):"] + [f"  {pct(c)}  {k}" for k, c in cats.most_common()]
    out += ["", f"top {top} functions on the stack (inclusive):"]
    out += [f"  {pct(c)}  {k[:150]}" for k, c in inclusive.most_common(top)]
    out += ["", f"top {top} innermost functions (self):"] + [f"  {pct(c)}  {k[:150]}" for k, c in own.most_common(top)]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--folded", help="also write the folded profile here (gzipped)")
    a = ap.parse_args(argv)
    try:
        with open(a.profile, errors="replace") as f:
            text = f.read()
    except OSError as e:
        print(f"cpu_profile: {a.profile}: {e.strerror}", file=sys.stderr)
        return 2
    print(summarize(text, a.top))
    if a.folded:
        import gzip

        with gzip.open(a.folded, "wt") as f:
            f.write(fold(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
