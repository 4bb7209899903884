"""Inline SVG plots of a run's case events for ``hybridfuzz report`` (no matplotlib, no network):
findings over time, time to first finding per signature, coverage of KV dtype x layer pattern
x prefix caching, and step sequences with their outcomes."""
from __future__ import annotations

import html
import math
from collections import Counter, defaultdict
from typing import Any

from hybridfuzz.campaign.records import CaseEvent

STATUS_COLORS = {"pass": "#4c9a5f", "divergence": "#d1495b", "unsupported": "#9aa0a6"}


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "—"
    s = float(s)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    span = max(hi - lo, 1e-9)
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    ticks, v = [], start
    while v <= hi + 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _time_ticks(tmax: float) -> list[float]:
    """Ticks at round seconds, minutes or hours, whichever unit _fmt_s will print."""
    unit = 1.0 if tmax < 120 else 60.0 if tmax < 7200 else 3600.0
    return [v * unit for v in _nice_ticks(0, tmax / unit)]


def _tick_label(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:g}"


def plot_findings_over_time(events: list[CaseEvent], width: int = 760, height: int = 300, first: float | None = None) -> str:
    """Step lines: distinct signatures found (left axis) and cases run (right axis) against time."""
    ml, mr, mt, mb = 56, 60, 20, 44
    w, h = width - ml - mr, height - mt - mb
    tmax = max([e.t for e in events] + [1.0])
    seen: set[str] = set()
    found_pts = [(0.0, 0)]
    case_pts = [(0.0, 0)]
    for i, e in enumerate(events, 1):
        t = e.t
        case_pts.append((t, i))
        if e.status == "divergence" and e.signature and e.signature not in seen:
            seen.add(e.signature)
            found_pts.append((t, len(seen)))
    found_pts.append((tmax, len(seen)))
    fmax = max(len(seen), 1)
    cmax = max(len(events), 1)

    def x(t):
        return ml + w * t / tmax

    def y(v, vmax):
        return mt + h - h * v / vmax

    def steps(pts, vmax):
        d = f"M{x(pts[0][0]):.1f},{y(pts[0][1], vmax):.1f}"
        for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
            d += f" H{x(t1):.1f} V{y(v1, vmax):.1f}"
        return d

    out = [f'<svg class="plot" role="img" aria-label="findings over time" viewBox="0 0 {width} {height}" width="{width}" height="{height}">']
    for v in _nice_ticks(0, fmax, min(fmax, 5)):
        out.append(f'<line x1="{ml}" x2="{ml + w}" y1="{y(v, fmax):.1f}" y2="{y(v, fmax):.1f}" class="grid"/>')
        out.append(f'<text x="{ml - 8}" y="{y(v, fmax) + 4:.1f}" text-anchor="end" class="tick">{_tick_label(v)}</text>')
    for v in _nice_ticks(0, cmax):
        out.append(f'<text x="{ml + w + 8}" y="{y(v, cmax) + 4:.1f}" class="tick cases">{_tick_label(v)}</text>')
    for t in _time_ticks(tmax):
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{mt + h}" y2="{mt + h + 5}" class="axis"/>')
        out.append(f'<text x="{x(t):.1f}" y="{mt + h + 18}" text-anchor="middle" class="tick">{_e(_fmt_s(t))}</text>')
    out.append(f'<line x1="{ml}" x2="{ml + w}" y1="{mt + h}" y2="{mt + h}" class="axis"/><line x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + h}" class="axis"/>')
    out.append(f'<path d="{steps(case_pts, cmax)}" class="line-cases"/>')
    out.append(f'<path d="{steps(found_pts, fmax)}" class="line-found"/>')
    for t, v in found_pts[1:-1]:
        out.append(f'<circle cx="{x(t):.1f}" cy="{y(v, fmax):.1f}" r="4" class="dot-found"><title>new signature at {_e(_fmt_s(t))}</title></circle>')
    if first is not None:
        out.append(f'<line x1="{x(first):.1f}" x2="{x(first):.1f}" y1="{mt}" y2="{mt + h}" class="first"/>')
        anchor = "start" if x(first) < ml + w * 0.7 else "end"
        dx = 6 if anchor == "start" else -6
        out.append(f'<text x="{x(first) + dx:.1f}" y="{mt + 12}" text-anchor="{anchor}" class="first-label">first finding {_e(_fmt_s(first))}</text>')
    out.append(f'<text x="{ml + w / 2}" y="{height - 6}" text-anchor="middle" class="label">time since start</text>')
    out.append(f'<text transform="translate(14,{mt + h / 2}) rotate(-90)" text-anchor="middle" class="label found">distinct findings</text>')
    out.append(f'<text transform="translate({width - 10},{mt + h / 2}) rotate(90)" text-anchor="middle" class="label cases">cases run</text>')
    out.append("</svg>")
    return "\n".join(out)


def first_seen(events: list[CaseEvent]) -> list[tuple[str, float, int]]:
    """(signature, first time, how many runs hit it), in order of discovery."""
    first: dict[str, float] = {}
    hits: Counter = Counter()
    for e in events:
        sig = e.signature
        if e.status == "divergence" and sig:
            hits[sig] += 1
            first.setdefault(sig, e.t)
    return [(s, t, hits[s]) for s, t in sorted(first.items(), key=lambda kv: kv[1])]


def plot_time_to_find(events: list[CaseEvent], tmax: float, width: int = 760) -> str:
    """One row per signature: a bar from 0 to when it was first found."""
    rows = first_seen(events)
    if not rows:
        return '<p class="empty">No findings in this run.</p>'
    ml, mr, mt, row = 300, 90, 10, 26
    w = width - ml - mr
    height = mt + row * len(rows) + 48
    tmax = max(tmax, max(t for _, t, _ in rows), 1.0)
    out = [f'<svg class="plot" role="img" aria-label="time to first finding per signature" viewBox="0 0 {width} {height}" width="{width}" height="{height}">']
    for t in _time_ticks(tmax):
        xx = ml + w * t / tmax
        out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{mt}" y2="{mt + row * len(rows)}" class="grid"/>')
        out.append(f'<text x="{xx:.1f}" y="{mt + row * len(rows) + 16}" text-anchor="middle" class="tick">{_e(_fmt_s(t))}</text>')
    for i, (sig, t, n) in enumerate(rows):
        yy = mt + i * row
        label = sig if len(sig) <= 44 else sig[:43] + "…"
        out.append(f'<text x="{ml - 8}" y="{yy + row / 2 + 4}" text-anchor="end" class="sig"><title>{_e(sig)}</title>{_e(label)}</text>')
        out.append(f'<rect x="{ml}" y="{yy + 6}" width="{max(w * t / tmax, 1.5):.1f}" height="{row - 12}" class="bar-find"><title>{_e(sig)}: first at {_e(_fmt_s(t))}, {n} hits</title></rect>')
        out.append(f'<text x="{ml + w * t / tmax + 6:.1f}" y="{yy + row / 2 + 4}" class="tick">{_e(_fmt_s(t))} · {n}×</text>')
    out.append(f'<text x="{ml + w / 2}" y="{height - 2}" text-anchor="middle" class="label">time to first finding</text>')
    out.append("</svg>")
    return "\n".join(out)


def _heat(n: int, nmax: int) -> str:
    if n == 0:
        return "#f3f4f6"
    f = (n / max(nmax, 1)) ** 0.5
    lo, hi = (219, 234, 254), (30, 64, 175)
    r, g, b = (round(lo[i] + (hi[i] - lo[i]) * f) for i in range(3))
    return f"rgb({r},{g},{b})"


def _pc(v) -> str:
    return {True: "on", False: "off", None: "default"}.get(v, str(v))


def plot_coverage(events: list[CaseEvent], cell: int = 46, max_rows: int = 16) -> str:
    """Heat map: rows = layer pattern, columns = KV dtype x prefix caching; cell = cases, red corner = findings."""
    gen = [e for e in events if e.phase == "generate"]
    if not gen:
        return '<p class="empty">No generated cases.</p>'
    dtypes = sorted({str(e.kv_cache_dtype) for e in gen}, key=lambda d: (d != "auto", d))
    pcs = [p for p in (False, None, True) if any(e.prefix_caching == p for e in gen)]
    per_layers = Counter(str(e.layers) for e in gen)
    layers = sorted(per_layers, key=lambda s: (len(s), s))
    if len(layers) > max_rows:  # keep the most used patterns and any with a finding; fold the rest into one row
        hit = {str(e.layers) for e in gen if e.status == "divergence"}
        keep = set(sorted(per_layers, key=lambda s: -per_layers[s])[:max_rows - 1]) | hit
        layers = [s for s in layers if s in keep] + ["other"]
    cases: Counter = Counter()
    bad: Counter = Counter()
    for e in gen:
        lay = str(e.layers)
        k = (lay if lay in layers else "other", str(e.kv_cache_dtype), e.prefix_caching)
        cases[k] += 1
        if e.status == "divergence":
            bad[k] += 1
    nmax = max(cases.values())
    cols = [(d, p) for d in dtypes for p in pcs]
    ml, mt = 90, 62
    width = max(ml + cell * len(cols) + 20, 640)  # the footnote needs 640 px
    height = mt + cell * len(layers) + 30
    out = [f'<svg class="plot" role="img" aria-label="coverage: KV dtype x layer pattern x prefix caching" viewBox="0 0 {width} {height}" width="{width}" height="{height}">']
    for j, d in enumerate(dtypes):
        x0 = ml + j * len(pcs) * cell
        fits = max(3, int(len(pcs) * cell / 7.5))  # characters of a 12 px label that fit over its columns
        label = d if len(d) <= fits else d[: fits - 1] + "…"
        out.append(f'<text x="{x0 + len(pcs) * cell / 2}" y="16" text-anchor="middle" class="coltop"><title>{_e(d)}</title>{_e(label)}</text>')
        out.append(f'<line x1="{x0 + 3}" x2="{x0 + len(pcs) * cell - 3}" y1="22" y2="22" class="axis"/>')
    for j, (d, p) in enumerate(cols):
        out.append(f'<text x="{ml + j * cell + cell / 2}" y="{mt - 10}" text-anchor="middle" class="tick">{_pc(p)}</text>')
    out.append(f'<text x="{ml - 8}" y="{mt - 10}" text-anchor="end" class="tick">prefix cache →</text>')
    for i, lay in enumerate(layers):
        yy = mt + i * cell
        out.append(f'<text x="{ml - 8}" y="{yy + cell / 2 + 4}" text-anchor="end" class="sig mono">{_e(lay)}</text>')
        for j, (d, p) in enumerate(cols):
            k = (lay, d, p)
            n, nb = cases[k], bad[k]
            xx = ml + j * cell
            tip = f"layers {lay}, kv {d}, prefix caching {_pc(p)}: {n} cases, {nb} divergent"
            out.append(f'<rect x="{xx + 1}" y="{yy + 1}" width="{cell - 2}" height="{cell - 2}" fill="{_heat(n, nmax)}" class="cell"><title>{_e(tip)}</title></rect>')
            if n:
                color = "#fff" if n / nmax > 0.3 else "#1f2937"
                out.append(f'<text x="{xx + cell / 2}" y="{yy + cell / 2 + 4}" text-anchor="middle" class="cellnum" fill="{color}">{n}</text>')
            if nb:
                out.append(f'<path d="M{xx + cell - 16},{yy + 1} H{xx + cell - 1} V{yy + 16} Z" class="corner"><title>{_e(tip)}</title></path>')
    out.append(f'<text x="{ml}" y="{height - 8}" class="tick">rows: layer pattern (L = linear attention, F = full attention); number = cases; red corner = findings</text>')
    out.append("</svg>")
    return "\n".join(out)


def plot_steps(events: list[CaseEvent], width: int = 760, top: int = 12) -> str:
    """Horizontal stacked bars: the most frequent step sequences and their outcomes."""
    gen = [e for e in events if e.phase == "generate"]
    if not gen:
        return '<p class="empty">No generated cases.</p>'
    by: dict[str, Counter] = defaultdict(Counter)
    for e in gen:
        by[_short_steps(e.steps)][e.status] += 1
    rows = sorted(by.items(), key=lambda kv: -sum(kv[1].values()))
    hidden = len(rows) - top
    rows = rows[:top]
    ml, mr, mt, row = 280, 60, 8, 24
    w = width - ml - mr
    nmax = max(sum(c.values()) for _, c in rows)
    height = mt + row * len(rows) + 40
    out = [f'<svg class="plot" role="img" aria-label="step sequences covered" viewBox="0 0 {width} {height}" width="{width}" height="{height}">']
    for i, (name, c) in enumerate(rows):
        yy = mt + i * row
        label = name if len(name) <= 42 else name[:41] + "…"
        out.append(f'<text x="{ml - 8}" y="{yy + row / 2 + 4}" text-anchor="end" class="sig mono"><title>{_e(name)}</title>{_e(label)}</text>')
        xx = ml
        for status in ("pass", "unsupported", "divergence"):
            n = c.get(status, 0)
            if n:
                bw = w * n / nmax
                out.append(f'<rect x="{xx:.1f}" y="{yy + 4}" width="{bw:.1f}" height="{row - 8}" fill="{STATUS_COLORS[status]}"><title>{_e(name)}: {n} {status}</title></rect>')
                xx += bw
        out.append(f'<text x="{xx + 6:.1f}" y="{yy + row / 2 + 4}" class="tick">{sum(c.values())}</text>')
    ly = mt + row * len(rows) + 22
    lx = ml
    for status, color in STATUS_COLORS.items():
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{color}"/><text x="{lx + 16}" y="{ly}" class="tick">{status}</text>')
        lx += 110
    if hidden > 0:
        out.append(f'<text x="{ml - 8}" y="{ly}" text-anchor="end" class="tick">+{hidden} rarer sequences</text>')
    out.append("</svg>")
    return "\n".join(out)


_ABBR = {"generate": "gen", "sleep": "sleep", "wake_up": "wake", "reset_prefix_cache": "reset"}


def _short_steps(steps: tuple[str, ...]) -> str:
    """(generate, generate, sleep, wake_up, generate) -> "gen×2 → sleep → wake → gen"."""
    names = [_ABBR.get(s, s) for s in steps]
    out: list[list] = []
    for n in names:
        if out and out[-1][0] == n:
            out[-1][1] += 1
        else:
            out.append([n, 1])
    return " → ".join(n if k == 1 else f"{n}×{k}" for n, k in out) or "(none)"


def _bars_status(events: list[CaseEvent]) -> dict[str, int]:
    c = Counter(e.status for e in events)
    return {s: c.get(s, 0) for s in STATUS_COLORS}
