"""What a tensor-parallel case (``engine.tensor_parallel_size: 2``) needs of its host and of its model, said in one
line before vLLM starts.

Why before vLLM: with ``distributed_executor_backend="mp"`` (engines/offline.py engine_kwargs, so that the fork
server's in-process engine core still gets one worker process per GPU) vLLM skips its own "world size larger than
the GPUs" check, and a worker then fails on a device it cannot see; and vLLM checks only the attention heads in its
config, while the GDN, Mamba and KV-head splits are ``divide`` assertions inside the layers' constructors: a bare
AssertionError, which engines/base.py ``classify`` calls a finding. A case this host or this model cannot shard is a
refusal (the config phase), never a finding.
"""
from __future__ import annotations

from hybridfuzz.case import Case
from hybridfuzz.model import FAMILIES, ModelSpec
from hybridfuzz.model.spec import MAMBA2_HEADS
from hybridfuzz.trace import ErrorInfo

WHERE = "hybridfuzz/tensor_parallel.py in refusal"  # ErrorInfo.where: no vLLM frame, it never started


def gpu_count(device: str) -> int:
    """GPUs this process may use: 0 on CPU; on CUDA ``torch.cuda.device_count()``, which honours CUDA_VISIBLE_DEVICES
    (a campaign worker's pin, campaign/placement.py) and creates no CUDA context (the fork server forks after it)."""
    if device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count()


def _kv_heads(spec: ModelSpec) -> int:
    """The KV heads vLLM builds: Zamba2's shared attention has as many as query heads (model/zamba2.py)."""
    return spec.num_attention_heads if spec.architecture == "zamba2" else spec.num_key_value_heads


def shard_problem(spec: ModelSpec, tp: int) -> tuple[str, str] | None:
    """(model field, one-line reason) of the first size vLLM cannot split over ``tp`` GPUs, or None.

    vLLM's rules (0.32.0): query heads divide evenly (ModelConfig.verify_with_parallel_config); KV heads divide evenly,
    or fewer KV heads than GPUs are replicated when they divide the GPU count (QKVParallelLinear): the uneven but
    legal split; GDN key and value heads divide evenly (``divide`` in the GDN state shape); Mamba2 heads divide evenly
    while one group is replicated on every GPU (MambaMixer2); the MLP, Mamba1 and short-conv inner sizes divide evenly.
    """
    if tp <= 1:
        return None
    mixer = FAMILIES[spec.architecture].mixer if spec.architecture in FAMILIES else ""
    kv = _kv_heads(spec)
    sizes: list[tuple[str, int]] = [("num_attention_heads", spec.num_attention_heads), ("intermediate_size", spec.intermediate_size)]
    if mixer == "gdn":
        sizes += [("linear_num_key_heads", spec.linear_num_key_heads), ("linear_num_value_heads", spec.linear_num_value_heads)]
    elif mixer in ("mamba1", "shortconv"):
        sizes.append(("hidden_size", spec.hidden_size))  # Mamba1's inner size is 2 x hidden_size; short conv's is hidden_size
    elif mixer == "mamba2" and MAMBA2_HEADS % tp:
        return "architecture", f"{spec.architecture}'s {MAMBA2_HEADS} Mamba2 heads do not split over {tp} GPUs"
    for name, value in sizes:
        if value % tp:
            return name, f"{value} does not split over tensor_parallel_size {tp} (vLLM divides it evenly)"
    if kv >= tp and kv % tp:
        return "num_key_value_heads", f"{kv} KV heads do not split over tensor_parallel_size {tp} (nor replicate: fewer than {tp} would)"
    if kv < tp and tp % kv:
        return "num_key_value_heads", f"{kv} KV heads cannot be replicated over tensor_parallel_size {tp} (it is not a multiple of them)"
    return None


def refusal(case: Case, gpus: int) -> str:
    """Why this host cannot run ``case`` (one line naming the field), or "" when it can."""
    tp = case.engine.tensor_parallel_size
    if tp <= 1:
        return ""
    if gpus < tp:
        return f"engine.tensor_parallel_size: needs {tp} GPUs, found {gpus}"
    problem = shard_problem(case.model, tp)
    return f"model.{problem[0]}: {problem[1]}" if problem else ""


def refused(why: str) -> ErrorInfo:
    """``refusal``'s line as the error of a start-up that never began: the config phase, so ``classify`` says rejected."""
    return ErrorInfo(type="ValueError", message=why, where=WHERE, phase="config")
