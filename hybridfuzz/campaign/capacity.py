"""How much work one GPU host takes: engines per GPU from its free memory and a measured
per-engine footprint, capped by the CPU cores that engine start-up is bound on.

Calibration (``hybridfuzz bench --at-once 8,16,24`` on an H200, vLLM 0.32.0, 2026-11-30,
results/2026-11-30-h200x2-vllm0.32.0-campaign-calibration/bench-at-once.json): 8, 16 and 24 tiny engines
peaked at 11063, 19333 and 21106 MB of GPU memory, under 1.4 GB an engine; 48 engines on
vLLM 0.26.0 took 41 GB (issue #12). Start-up is CPU-bound: on 16 cores, 32 and 48
engines at once started in a median 22 and 34 s (69-71 starts/min) where 24 took 13 s,
so slots beyond about 1.5 per core only queue when they all start at once. In persistent mode
(12 cases per engine start on a GPU) engines start a few at a time and mostly run steps,
so the cap is 2 per core (set on 2026-11-30 for the H200-pair campaigns of vLLM 0.26.0 and 0.32.0). The spares are
shared by every worker's background shrinks (campaign/slots.py): each worker used to shrink with
the full spare count as its own, and with five findings open the load of an H200 host rose to 3
per core while generation fell from 56 to 24 cases/min (2026-12-01, results/2026-12-01-h200-vllm0.26.0-default-campaigns/).
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

ENGINE_FOOTPRINT_MB = 1400  # per tiny engine, with headroom over the measured 0.9-1.4 GB
MEMORY_FRACTION = 0.8  # of the free memory, for engines (the rest: fragmentation, sleep/wake peaks)
SLOTS_PER_CORE = 2.0
ENGINES_PER_WORKER = 2  # a session and its reference session
SHRINK_PARALLEL = 2  # variants one background shrink runs at once (each a case and its reference)


@dataclass(frozen=True)
class GpuPlan:
    gpus: int
    free_mb: list[int]
    slots_per_gpu: int  # engines at once on one GPU
    workers_per_gpu: int  # Hypothesis workers, each running a session pair
    shrink_parallel: int  # variants at once in one background shrink
    shrinks_per_gpu: int  # background shrinks at once, all workers together (campaign/slots.py)

    def describe(self) -> str:
        return (f"{self.gpus} GPU(s), free {', '.join(f'{m / 1024:.0f} GiB' for m in self.free_mb)}: "
                f"{self.slots_per_gpu} engine slots per GPU ({ENGINE_FOOTPRINT_MB} MB each, capped at "
                f"{SLOTS_PER_CORE} per core), {self.workers_per_gpu} workers per GPU, "
                f"{self.shrinks_per_gpu} background shrinks at once per GPU ({self.shrink_parallel} variants each)")


def gpu_free_mb() -> list[int]:
    """Free memory of each visible GPU, from nvidia-smi (no CUDA context in this process)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.free", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            rows[int(parts[0])] = int(parts[1])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [int(d) for d in visible.split(",") if d.strip().isdigit()]
        return [rows[i] for i in ids if i in rows]
    return [rows[i] for i in sorted(rows)]


def plan(free_mb: list[int], cores: int) -> GpuPlan:
    """The split for these GPUs and cores: pure, so it is tested without a GPU."""
    if not free_mb:
        return GpuPlan(0, [], 0, 0, 0, 0)
    by_memory = int(min(free_mb) * MEMORY_FRACTION // ENGINE_FOOTPRINT_MB)
    by_cores = max(2, int(cores * SLOTS_PER_CORE) // len(free_mb))
    slots = max(2, min(by_memory, by_cores))
    # three quarters of the slots generate; the rest are the spares that all background shrinks share
    workers = max(1, (slots * 3 // 4) // ENGINES_PER_WORKER)
    spare = slots - workers * ENGINES_PER_WORKER
    shrinks = max(1, spare // (ENGINES_PER_WORKER * SHRINK_PARALLEL))
    return GpuPlan(len(free_mb), free_mb, slots, workers, SHRINK_PARALLEL, shrinks)


def detect(cores: int | None = None) -> GpuPlan:
    """This host's plan; cores are those this process may run on (taskset splits a host between campaigns)."""
    return plan(gpu_free_mb(), cores or len(os.sched_getaffinity(0)) or 1)


def host_cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) clock ticks of every core of the host since boot, from /proc/stat (None where there is none):
    the H200 campaigns were CPU-bound (14.96 of 16 cores busy in user time, 2026-12-02), which only the host's own
    counters show, background shrinks and every process included."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    return total - idle, total


def busy_cores(before: tuple[int, int], after: tuple[int, int], cores: int) -> float | None:
    """Cores busy on average between two ``host_cpu_jiffies`` readings."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total * cores, 2) if total > 0 else None
