"""Property 1: creating the per-token-head scale views changes no byte of the KV cache.

vLLM's ``TritonAttentionImpl._ensure_scale_caches(kv_cache)`` builds float32 views
over the scale slots inlined in each (head, slot) of the attention page. In a hybrid
model the attention layer's tensor aliases the pages of the GDN layers (cache groups
overlay each other; a block id belongs to one group at a time), so any write through
those views lands on whatever the block's current owner keeps there: GDN conv/ssm
state included. The check fills the whole backing allocation with an
address-dependent sentinel (bytes 0xA0..0xA7, never 0x00/0x80/0x3F, so a fill of
0.0 or 1.0 cannot hide), calls the real method, and diffs every byte. Each changed
byte is attributed to every view that addresses it (GDN conv/ssm state of layer L at
block B and element [i, j, ...]; attention K/V data or K/V scale of head h, slot n),
and to the block's live owner drawn in the layout (``owners``; block 0 is vLLM's null
block and never handed out).

The impl is ``object.__new__(TritonAttentionImpl)``: its constructor wants a full
attention config, and ``_ensure_scale_caches`` reads nothing of ``self`` but the
``_k_scale_cache``/``_v_scale_cache`` class attributes (None) it then sets. The method
itself is vLLM's, called unmodified.
"""
from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace
from typing import Callable

from hybridfuzz.components._build import LayoutRejected, build, byte_addresses, view_extent, vllm_modules
from hybridfuzz.oracles.verdict import Verdict

NAME = "scale_view_fill"
ORACLE = f"component:{NAME}"
METHOD = "TritonAttentionImpl._ensure_scale_caches"
LAYOUT_NAMES = {"LBHNC": "HND", "LBNHC": "NHD"}


def real_method() -> tuple[type, Callable] | None:
    from vllm.v1.attention.backends.triton_attn import TritonAttentionImpl

    fn = getattr(TritonAttentionImpl, "_ensure_scale_caches", None)
    return (TritonAttentionImpl, fn) if fn is not None else None


def sentinel(n: int):
    torch = vllm_modules().torch
    a = torch.arange(n, dtype=torch.int64)
    return (0xA0 | ((a * 5 + (a >> 3)) & 7)).to(torch.uint8)


def _attn_part(c_byte: int, content_bytes: int) -> str:
    """Which part of the packed [K | K_scale | V | V_scale] content a byte offset is in (vLLM's docstring layout)."""
    half = content_bytes // 2
    side, off = ("K", c_byte) if c_byte < half else ("V", c_byte - half)
    return f"{side}-scale" if off >= half - 4 else f"{side} data"


def _labels(built, changed: list[int]) -> dict[int, list[tuple[str, int, str]]]:
    """addr -> [(view label, block, detail)] for every view that addresses it."""
    torch = vllm_modules().torch
    want = torch.tensor(changed, dtype=torch.int64)
    out: dict[int, list[tuple[str, int, str]]] = defaultdict(list)
    for layer, states in built.gdn_states.items():
        for sname, view in zip(built.state_names, states):
            addr = byte_addresses(view)
            hit = torch.isin(addr, want).nonzero().tolist()
            for idx in hit:
                a = int(addr[tuple(idx)])
                out[a].append((f"GDN {layer} {sname} state", idx[0], f"[{', '.join(map(str, idx[1:-1]))}] byte {idx[-1]}"))
    for layer, view in built.caches.items():
        if layer in built.gdn_states:
            continue
        addr = byte_addresses(view)
        hit = torch.isin(addr, want).nonzero().tolist()
        content = view.shape[-1] * view.element_size()
        for idx in hit:
            a = int(addr[tuple(idx)])
            b, h, n, c, byte = idx
            out[a].append((f"attention {layer}", b, f"{_attn_part(c * view.element_size() + byte, content)} head {h} slot {n}"))
    return out


def _owner(built, block: int) -> str:
    if block == 0:
        return "null block (never handed out)"
    owners = built.layout.get("owners") or []
    kind = owners[block - 1] if block - 1 < len(owners) else "free"
    return {"linear_attention": "live GDN state", "full_attention": "live attention KV", "free": "free"}.get(kind, kind)


def _page_offset(built, label: str, block: int, addr: int) -> int:
    parts = label.split()
    layer = parts[1]
    view = built.caches[layer]
    return addr - view_extent(view[block])[0]


def describe_layout(built) -> str:
    lay = built.layout
    pages = sorted({g.kv_cache_spec.page_size_bytes for g in built.groups})
    gdn = next(iter(built.gdn_states.values()), None)
    states = ", ".join(f"{n} {tuple(v.shape[1:])} {str(v.dtype).replace('torch.', '')}" for n, v in zip(built.state_names, gdn)) if gdn else "none"
    lname = lay.get("layout", "LBHNC")
    return (f"layout: layers={list(lay['layers'])} kv_cache_dtype={lay.get('kv_cache_dtype')} model_dtype={lay.get('model_dtype', 'bfloat16')} "
            f"{lname}{' (' + LAYOUT_NAMES[lname] + ')' if lname in LAYOUT_NAMES else ''} num_blocks={lay['num_blocks']} block_size={lay['block_size']} "
            f"num_kv_heads={lay['num_kv_heads']} head_size={lay['head_size']} owners={list(lay.get('owners') or [])}; "
            f"vLLM made {len(built.groups)} groups, page sizes {pages} B, GDN states {states}")


def check(layout: dict, ensure: Callable | None = None, impl_cls: type | None = None, max_runs: int = 12) -> Verdict:
    """Run the property on one layout. ``ensure(impl, kv_cache)`` defaults to vLLM's own method."""
    if ensure is None:
        found = real_method()
        if found is None:
            return Verdict("unsupported", ORACLE, f"this vLLM has no {METHOD} (or successor known to hybridfuzz)", symptom="no-method")
        impl_cls, ensure = found
    kvd = layout.get("kv_cache_dtype", "")
    if "per_token_head" not in kvd:
        return Verdict("unsupported", ORACLE, f"kv_cache_dtype {kvd!r} has no per-token-head scales; vLLM never creates scale views for it", symptom="not-per-token-head")
    try:
        built = build(layout)
    except LayoutRejected as e:
        return Verdict("unsupported", ORACLE, str(e), symptom="layout-rejected")
    raw = built.storage_bytes
    raw.copy_(sentinel(raw.numel()))
    before = raw.clone()
    for layer, view in built.caches.items():
        if layer in built.gdn_states:
            continue
        impl = object.__new__(impl_cls) if impl_cls is not None else SimpleNamespace(_k_scale_cache=None, _v_scale_cache=None)
        ensure(impl, view)
    diff = (raw != before).nonzero().flatten().tolist()
    evidence = [describe_layout(built)]
    if not diff:
        return Verdict("pass", ORACLE, f"{METHOD} changed none of {raw.numel()} cache bytes", evidence)
    labels = _labels(built, diff)
    # Contiguous runs with the same attribution.
    runs: list[list] = []
    for a in diff:
        key = [(lab, blk) for lab, blk, _ in labels.get(a, [])]
        if runs and a == runs[-1][1] + 1 and runs[-1][2] == key:
            runs[-1][1] = a
        else:
            runs.append([a, a, key])
    live_gdn: dict[tuple[str, int], int] = defaultdict(int)
    per_view: dict[tuple[int, str], list] = defaultdict(list)  # (block, label) -> [(page lo, page hi, first elem, last elem)]
    blocks = set()
    for lo, hi, key in runs:
        for lab, blk, detail in labels.get(lo, []):
            blocks.add(blk)
            last = next((d for la, bl, d in labels.get(hi, []) if la == lab and bl == blk), detail)
            off = _page_offset(built, lab, blk, lo)
            per_view[(blk, lab)].append((off, off + hi - lo, detail, last))
            if lab.startswith("GDN") and _owner(built, blk) == "live GDN state":
                live_gdn[(lab, blk)] += hi - lo + 1

    def rank(item):
        (blk, lab), _ = item
        return (not (lab.startswith("GDN") and _owner(built, blk) == "live GDN state"), blk, lab)

    for (blk, lab), spans in sorted(per_view.items(), key=rank)[:max_runs]:
        nbytes = sum(h - l + 1 for l, h, _, _ in spans)
        where = ", ".join(f"{l}..{h} [{d.split(' byte')[0]}{'' if d == e else ' .. ' + e.split(' byte')[0]}]" for l, h, d, e in spans[:6])
        more = f", ... {len(spans) - 6} more" if len(spans) > 6 else ""
        evidence.append(f"block {blk} ({_owner(built, blk)}): bytes {where}{more} of {lab} changed ({nbytes} bytes)")
    if len(per_view) > max_runs:
        evidence.append(f"... {len(per_view) - max_runs} more (block, view) pairs")
    for lo, hi, key in sorted(runs, key=lambda r: (not any(l.startswith("GDN") and _owner(built, b) == "live GDN state" for l, b in r[2]), r[0]))[:3]:
        evidence.append(f"allocation bytes {lo}..{hi}: {before[lo:hi + 1].tolist()} -> {raw[lo:hi + 1].tolist()} (sentinel -> float32 bytes written)")
    if live_gdn:
        gdn_txt = ", ".join(f"{lab} of block {blk}: {n} bytes" for (lab, blk), n in sorted(live_gdn.items()))
        summary = f"{METHOD} changed {len(diff)} of {raw.numel()} cache bytes in blocks {sorted(blocks)}; live GDN state overwritten: {gdn_txt}"
        symptom = "overwrites-live-gdn-state"
    else:
        summary = f"{METHOD} changed {len(diff)} of {raw.numel()} cache bytes in blocks {sorted(blocks)}"
        symptom = "changes-cache-bytes"
    return Verdict("divergence", ORACLE, summary, evidence, symptom=symptom, where=METHOD)


def run(case) -> Verdict:
    return check(case.component.get("layout", {}))
