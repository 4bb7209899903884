"""How an engine process waits for its GPU: asleep, not spinning on a core.

CUDA's default (``auto``) spins a CPU core while a process waits for the GPU whenever the process has fewer
contexts than the machine has cores, which is always so for one engine a process, and a GPU campaign runs 24
and more engines on one GPU's 16 host cores. ``block`` (CU_CTX_SCHED_BLOCKING_SYNC) makes a waiting engine
sleep until the GPU is done instead. The schedule changes when a process runs, never what a kernel computes.

Measured on the H200 (2026-12-02, vLLM 0.32.0, results/2026-12-02-h200-vllm0.32.0-cuda-sync-block/): with ``block`` a default
10-minute campaign ran 82.5 cases/min against 82.0 with spinning waits the session before, the same 0.80 s of
steps a case and 32.6 s against 34.5 s of median start-up: no measurable gain. The host was saturated in
user time either way (15 of 16 cores), so spinning was not what filled it. Kept as the default because a
waiting engine then leaves its core to the others; the A/B on one host is still to be run.

The flag is set on each GPU's primary context (the one torch uses) through the driver API, before torch
creates it: first thing in an engine process. ``HYBRIDFUZZ_CUDA_SYNC`` chooses (``block`` by default;
``spin``, ``yield`` or ``auto`` for CUDA's own heuristic) so the two can be measured against each other.
"""
from __future__ import annotations

import ctypes
import os
from typing import Literal, get_args

Schedule = Literal["block", "yield", "spin", "auto"]
ENV = "HYBRIDFUZZ_CUDA_SYNC"
DEFAULT: Schedule = "block"
# CUctx_flags: CU_CTX_SCHED_AUTO, _SPIN, _YIELD, _BLOCKING_SYNC
FLAGS: dict[Schedule, int] = {"auto": 0x0, "spin": 0x1, "yield": 0x2, "block": 0x4}
SETTINGS_KEY = "cuda_sync"  # Trace.engine_settings key: the schedule the engine's contexts got

_applied: Schedule | None = None


def chosen(environ=os.environ) -> Schedule:
    """The schedule ``HYBRIDFUZZ_CUDA_SYNC`` asks for; ValueError naming the variable for any other value."""
    value = environ.get(ENV, "").strip().lower() or DEFAULT
    if value not in FLAGS:
        raise ValueError(f"{ENV}: unknown schedule {value!r} (one of: {', '.join(get_args(Schedule))})")
    return value  # type: ignore[return-value]


def apply(schedule: Schedule | None = None) -> Schedule | None:
    """Give every visible GPU's primary context ``schedule`` (default: ``chosen()``); once a process.

    Returns the schedule set, or None where there is no NVIDIA driver (the CPU engine) or it refused. Must run
    before the process's first CUDA call that creates a context; never in a process that forks engines later
    (cuInit before fork breaks the children)."""
    global _applied
    if _applied is not None:
        return _applied
    schedule = schedule or chosen()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if cuda.cuInit(0) != 0:
        return None
    # _v2 (CUDA 11+) may change the flags of an active context too; the first version only of an inactive one
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return None
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            return None
        if set_flags(device, FLAGS[schedule]) != 0:
            return None
    _applied = schedule
    return schedule
