"""Property 3: what vLLM's hybrid KV-cache configuration promises, over generated layer specs.

Driven through vLLM's own ``get_kv_cache_groups`` / ``get_kv_cache_config_from_groups``
/ ``allocate_kv_cache`` (see _build.py) and its ``BlockPool``:

* every per-layer view (and every GDN conv/ssm state view) stays inside its backing allocation;
* layers of one cache group agree on page size, and for any two layers block ``i``'s
  page never shares a byte with block ``j != i`` of another layer (groups may alias only
  block-for-block: "a block ID is owned by one group at a time"), and two layers of the
  same group never share a byte at all;
* the block pool never hands one block to two owners at once, never hands out the null
  block, and its free count adds up.
"""
from __future__ import annotations

from collections import defaultdict

from hybridfuzz.components._build import LayoutRejected, build, byte_addresses, view_extent, vllm_modules
from hybridfuzz.oracles.verdict import Verdict

NAME = "kv_layout"
ORACLE = f"component:{NAME}"


def _fail(summary: str, evidence: list[str], symptom: str, where: str) -> Verdict:
    return Verdict("divergence", ORACLE, summary, evidence, symptom=symptom, where=where)


def check_layout(layout: dict) -> Verdict:
    try:
        built = build(layout)
    except LayoutRejected as e:
        return Verdict("unsupported", ORACLE, str(e), symptom="layout-rejected")
    from hybridfuzz.components.scale_view_fill import describe_layout

    ev = [describe_layout(built)]
    nbytes = built.storage_bytes.numel()
    views: dict[str, object] = dict(built.caches)
    for layer, states in built.gdn_states.items():
        for sname, v in zip(built.state_names, states):
            views[f"{layer}:{sname}"] = v
    for name, v in views.items():
        lo, hi = view_extent(v)
        if lo < 0 or hi >= nbytes:
            return _fail(f"view of {name} addresses bytes {lo}..{hi} outside its {nbytes}-byte backing allocation", ev,
                         "view-out-of-bounds", "allocate_kv_cache")
    for gi, g in enumerate(built.groups):
        spec = g.kv_cache_spec
        sizes = {n: (spec.kv_cache_specs[n] if hasattr(spec, "kv_cache_specs") else spec).page_size_bytes for n in g.layer_names}
        if len(set(sizes.values())) > 1:
            return _fail(f"cache group {gi} mixes page sizes {sizes}", ev, "group-page-size-mismatch", "get_kv_cache_groups")
    # Block-for-block aliasing only: exact byte sets per (layer, block), not extents (H-outer layouts interleave).
    torch = vllm_modules().torch
    nb = built.config.num_blocks
    pages: dict[str, list] = {}
    for layer, v in built.caches.items():
        ratio = max(1, v.shape[0] // nb)
        pages[layer] = [byte_addresses(v[b * ratio:(b + 1) * ratio]).flatten() for b in range(nb)]
    owner = {n: gi for gi, g in enumerate(built.groups) for n in g.layer_names}
    names = list(pages)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            same_group = owner.get(a) == owner.get(b)
            for bi, pa in enumerate(pages[a]):
                for bj, pb in enumerate(pages[b]):
                    if not (same_group or bi != bj):
                        continue
                    shared = pa[torch.isin(pa, pb)]
                    if shared.numel():
                        what = "same cache group" if same_group else "different blocks of different groups"
                        lo, hi = int(shared.min()), int(shared.max())
                        ev.append(f"{a} block {bi} and {b} block {bj} share {shared.numel()} bytes in allocation bytes {lo}..{hi}")
                        return _fail(f"block {bi} of {a} shares {shared.numel()} bytes with block {bj} of {b} ({what})", ev,
                                     "pages-alias-in-group" if same_group else "pages-alias-across-blocks", "get_kv_cache_config_from_groups")
    return Verdict("pass", ORACLE, f"{len(views)} views inside {nbytes} bytes; {len(built.groups)} groups alias block-for-block only", ev)


def check_block_pool(num_blocks: int, ops: list[list], enable_caching: bool = False) -> Verdict:
    """ops: [["alloc", owner, n] | ["free", owner]]; owners are arbitrary small ints (requests x groups)."""
    vllm_modules()
    from vllm.v1.core.block_pool import BlockPool

    pool = BlockPool(num_gpu_blocks=num_blocks, enable_caching=enable_caching, hash_block_size=16)
    held: dict[int, list] = defaultdict(list)
    for step, op in enumerate(ops):
        if op[0] == "alloc":
            _, who, n = op
            if n > pool.get_num_free_blocks():
                continue  # the scheduler never asks for more than is free
            got = pool.get_new_blocks(n)
            ids = [blk.block_id for blk in got]
            taken = {blk.block_id: w for w, bl in held.items() for blk in bl}
            for bid in ids:
                if bid == pool.null_block.block_id or bid >= num_blocks or bid < 0:
                    return _fail(f"step {step}: get_new_blocks handed out block {bid} (null block or out of range)", [f"ops: {ops}"], "bad-block-id", "BlockPool.get_new_blocks")
                if bid in taken:
                    return _fail(f"step {step}: block {bid} handed to owner {who} while owner {taken[bid]} holds it", [f"ops: {ops}"], "block-double-owned", "BlockPool.get_new_blocks")
            if len(set(ids)) != len(ids):
                return _fail(f"step {step}: one call returned a block twice: {ids}", [f"ops: {ops}"], "block-double-owned", "BlockPool.get_new_blocks")
            held[who].extend(got)
        else:
            _, who = op
            pool.free_blocks(held.pop(who, []))
        live = sum(len(b) for b in held.values())
        if pool.get_num_free_blocks() != num_blocks - 1 - live:
            return _fail(f"step {step}: {pool.get_num_free_blocks()} free blocks but {num_blocks - 1 - live} expected", [f"ops: {ops}"], "free-count", "BlockPool")
    return Verdict("pass", ORACLE, f"{len(ops)} block-pool ops, no block owned twice")


def run(case) -> Verdict:
    c = case.component
    if "pool" in c:
        p = c["pool"]
        return check_block_pool(int(p["num_blocks"]), p["ops"], bool(p.get("enable_caching", False)))
    return check_layout(c.get("layout", {}))
