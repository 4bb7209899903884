#!/usr/bin/env python3
"""The fp8 KV reference divergences of this campaign's events, and the signatures that hid them.

    python3 results/gpu-h200-2026-12-04-s24/fp8_reference_events.py

Counts, over res/c33's case events (phase generate), the fp8 / fp8_e4m3 cases, those that diverged from the
reference, per signature and per (family, weights, graphs), and which of those signatures the corpus carries only
from CPU observations (the campaign took them as known before findings.known_signatures was kept per device)."""
import collections
import os

from hybridfuzz.campaign.records import iter_events
from hybridfuzz.findings import known_signatures

here = os.path.dirname(os.path.abspath(__file__))
run = os.path.join(here, "res", "c33")
corpus = os.path.join(here, "..", "..", "corpus")
events = [e for e in iter_events(run) if e.phase == "generate" and e.kv_cache_dtype in ("fp8", "fp8_e4m3")]
bad = [e for e in events if e.status == "divergence" and e.signature.startswith("reference")]
print(f"{len(events)} fp8 / fp8_e4m3 cases, {len(bad)} diverged from the reference")
by_sig = collections.Counter(e.signature for e in bad)
cpu_only = known_signatures(corpus, on="cpu") - known_signatures(corpus, on="gpu")
for sig, n in by_sig.most_common():
    print(f"  {n:3d}  {sig}{'   (known from CPU cases only)' if sig in cpu_only else ''}")
print(f"  {sum(n for s, n in by_sig.items() if s in cpu_only)} of them under signatures known from CPU cases only")
base = collections.Counter((e.family, e.weights, e.graphs) for e in events)
for key, n in collections.Counter((e.family, e.weights, e.graphs) for e in bad).most_common():
    print(f"  {key}: {n} of {base[key]}")
