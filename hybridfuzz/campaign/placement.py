"""Where each GPU worker of a campaign runs: on one GPU, drawing single-GPU cases, or on a GPU pair
(CUDA_VISIBLE_DEVICES="0,1"), drawing only tensor-parallel cases (engine.tensor_parallel_size: 2).

A worker runs a session and its reference session (capacity.ENGINES_PER_WORKER). A single-GPU worker holds two
engine slots on its GPU. A pair worker's TP=2 engine holds one slot on each GPU of the pair and its reference (the
same case on one GPU, oracle.reference tensor_parallel_size: 1) one more on the pair's first visible GPU: two slots
on one GPU, one on the other. Pair workers alternate which GPU comes first ("0,1", "1,0"), so both GPUs of a pair
carry the same load, and single-GPU workers fill what is left of each GPU's generation slots. With fewer than two
GPUs every worker is a single-GPU one, as before. Pure: ``place`` is tested without a GPU.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from hybridfuzz.campaign.capacity import ENGINES_PER_WORKER

TP2_SHARE = 0.25  # of a pair's generation engine slots, for TP=2 sessions; at least one pair worker a pair
PAIR_SLOTS = (2, 1)  # engine slots a pair worker holds on its first and its second GPU


@dataclass(frozen=True)
class Placement:
    devices: tuple[int, ...]  # indices into the GPUs the supervisor sees, the first being the worker's device 0
    tensor_parallel_size: int  # the only size the worker's cases draw

    def cuda_visible_devices(self, parent: str | None = None) -> str:
        """The worker's CUDA_VISIBLE_DEVICES: its indices, or the ids they index in the supervisor's own list."""
        ids = [d.strip() for d in parent.split(",") if d.strip()] if parent else []
        return ",".join(ids[d] if d < len(ids) else str(d) for d in self.devices)


def place(gpus: int, workers_per_gpu: int, tensor_parallel: bool = True) -> list[Placement]:
    """One placement per worker, for ``gpus`` GPUs whose generation slots are ``workers_per_gpu`` single-GPU workers
    each (capacity.plan). GPUs are paired in order (0-1, 2-3; an odd last one stays single). Listed round robin,
    a pair worker first, so that a campaign given fewer workers than planned still draws both kinds."""
    if gpus <= 0 or workers_per_gpu <= 0:
        return []
    per_gpu = workers_per_gpu * ENGINES_PER_WORKER  # generation engine slots on each GPU
    queues: list[list[Placement]] = []
    singles: list[list[Placement]] = []
    paired = gpus // 2 * 2 if tensor_parallel else 0
    for a in range(0, paired, 2):
        pairs = max(1, int(TP2_SHARE * 2 * per_gpu) // sum(PAIR_SLOTS))
        used = {a: 0, a + 1: 0}
        order = [(a, a + 1) if j % 2 == 0 else (a + 1, a) for j in range(pairs)]
        for first, second in order:
            used[first] += PAIR_SLOTS[0]
            used[second] += PAIR_SLOTS[1]
        queues.append([Placement(devices, 2) for devices in order])
        singles += [[Placement((g,), 1)] * (max(0, per_gpu - used[g]) // ENGINES_PER_WORKER) for g in (a, a + 1)]
    singles += [[Placement((g,), 1)] * workers_per_gpu for g in range(paired, gpus)]
    queues += singles
    out: list[Placement] = []
    while any(queues):
        out += [q.pop(0) for q in queues if q]
    return out


def describe(placements: list[Placement]) -> str:
    pairs = sum(1 for p in placements if p.tensor_parallel_size > 1)
    return (f"{pairs} TP=2 workers on GPU pairs, {len(placements) - pairs} single-GPU workers" if pairs
            else f"{len(placements)} single-GPU workers")


def pinned(platform, tensor_parallel_size: int):
    """A worker's platform where the supervisor pinned it (``--tensor-parallel``): the GPUs its CUDA_VISIBLE_DEVICES
    shows (the supervisor's platform file counted them all) and the one tensor-parallel size its cases draw."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = len([d for d in visible.split(",") if d.strip()]) if visible is not None else tensor_parallel_size
    return dataclasses.replace(platform, gpu_count=gpus, tensor_parallel_sizes=(tensor_parallel_size,))
