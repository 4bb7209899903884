"""``hybridfuzz report DIR``: one self-contained HTML page for a ``fuzz`` or ``campaign`` directory.

Reads what the runs write (campaign/records.py): the case events of every loop through
``iter_events`` (DIR/events.jsonl, DIR/workers/*/events.jsonl), DIR/summary.json (a fuzz
run's RunSummary or a campaign's aggregate), the finding files (DIR/findings/, or the paths
the summary names) and, for a campaign, each finding's state.

Plots are inline SVG drawn here (no matplotlib, no network): findings over time, time to
first finding per signature, coverage of KV dtype x layer pattern x prefix caching, and
of step sequences.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from hybridfuzz.campaign.records import CaseEvent, iter_events
from hybridfuzz.report.plots import _bars_status, _e, _fmt_s, first_seen, plot_coverage, plot_findings_over_time, plot_steps, plot_time_to_find


@dataclass
class LoadedRun:
    """A fuzz or campaign directory as the report reads it (not to be confused with the campaign supervisor)."""

    path: str
    kind: Literal["fuzz", "campaign"]
    summary: dict[str, Any]
    events: list[CaseEvent]  # t = seconds since the run's first case (campaign: over every worker)
    findings: list[tuple[str, Any]] = field(default_factory=list)  # (file name, Case or error string)
    states: dict[str, str] = field(default_factory=dict)  # signature -> finding state (campaigns)
    problems: list[str] = field(default_factory=list)


def _timeline(events: list[CaseEvent]) -> list[CaseEvent]:
    """Events on one time axis: wall-clock seconds since the first case where every event has a wall
    time (several workers, restarts), else the loop's own t (files written before wall existed)."""
    if events and all(e.wall is not None for e in events):
        t0 = min(e.wall - e.t for e in events)  # when the first loop started
        events = [dataclasses.replace(e, t=round(e.wall - t0, 3)) for e in events]
    return sorted(events, key=lambda e: e.t)


def load_run(path: str, redis_client=None) -> LoadedRun:
    """Read a fuzz or campaign directory; with a Redis client (campaign --redis), also the findings
    other hosts wrote, from the finding store."""
    problems: list[str] = []
    kind: Literal["fuzz", "campaign"] = "campaign" if os.path.isdir(os.path.join(path, "workers")) else "fuzz"
    summary: dict[str, Any] = {}
    try:
        with open(os.path.join(path, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
        if not isinstance(summary, dict):
            raise ValueError("not a JSON object")
    except OSError as e:
        problems.append(f"summary.json: {e.strerror or type(e).__name__}")
        summary = {}
    except ValueError as e:
        problems.append(f"summary.json: {e}")
        summary = {}
    events = _timeline(list(iter_events(path, problems)))
    records = {}
    if kind == "campaign":
        from hybridfuzz.campaign.state import FindingStore

        records = FindingStore(path, redis_client).all()
    states = {sig: rec.state.value for sig, rec in records.items()}
    fdir = os.path.join(path, "findings")
    if os.path.isdir(fdir):
        paths = [os.path.join(fdir, n) for n in sorted(os.listdir(fdir)) if n.endswith((".yaml", ".yml", ".yaml.flaky"))]
    else:  # a fuzz run in a checkout writes its findings to corpus/found: the summary names them
        paths = [f["path"] for f in summary.get("finding_list", []) if isinstance(f, dict) and f.get("path")]
    findings: list[tuple[str, Any]] = []
    from hybridfuzz.case import CaseError, load_case, load_case_file

    for fp in paths:
        try:
            findings.append((os.path.relpath(fp, path), load_case_file(fp)))
        except CaseError as e:
            findings.append((os.path.relpath(fp, path), str(e)))
    local = {os.path.basename(fp).removesuffix(".flaky") for fp in paths}
    for rec in records.values():  # written on another host: the store carries the case itself
        if rec.text and os.path.basename(rec.path).removesuffix(".flaky") not in local:
            try:
                findings.append((f"{rec.host}:{rec.path}", load_case(rec.text)))
            except CaseError as e:
                findings.append((f"{rec.host}:{rec.path}", str(e)))
    return LoadedRun(path, kind, summary, events, findings, states, problems)


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1f2937;margin:0;background:#f8fafc}
main{max-width:860px;margin:0 auto;padding:24px 28px 48px;background:#fff;min-height:100vh;box-shadow:0 0 0 1px #e5e7eb}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:30px 0 6px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.sub{color:#6b7280;margin:0 0 16px}.note{color:#6b7280;font-size:13px;margin:2px 0 8px}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:10px}.card{border:1px solid #e5e7eb;border-radius:8px;padding:10px 12px}
.card .v{font-size:22px;font-weight:600}.card .k{color:#6b7280;font-size:12px}.card.bad .v{color:#d1495b}
svg.plot{display:block;max-width:100%;height:auto;font-family:inherit}
.grid{stroke:#eef0f3}.axis{stroke:#9ca3af}.tick{font-size:11px;fill:#4b5563}.label{font-size:12px;fill:#374151}
.found{fill:#d1495b}.cases{fill:#2563eb}.line-found{fill:none;stroke:#d1495b;stroke-width:2.5}.line-cases{fill:none;stroke:#2563eb;stroke-width:1.5;stroke-dasharray:4 3}
.dot-found{fill:#d1495b;stroke:#fff;stroke-width:1.5}.first{stroke:#f59e0b;stroke-width:1.5;stroke-dasharray:5 3}.first-label{font-size:11px;fill:#b45309}
.bar-find{fill:#d1495b;opacity:.85}.sig{font-size:12px;fill:#374151}.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
.coltop{font-size:12px;font-weight:600;fill:#374151}.cellnum{font-size:12px;font-weight:600}.corner{fill:#d1495b}.cell{stroke:#fff}
.empty{color:#6b7280;font-style:italic}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
th{color:#6b7280;font-weight:600}code{font-family:ui-monospace,Menlo,monospace;font-size:12px;background:#f3f4f6;padding:1px 4px;border-radius:3px}
.legend{display:flex;gap:16px;font-size:12px;color:#4b5563;margin:4px 0}.legend i{display:inline-block;width:18px;height:3px;vertical-align:middle;margin-right:5px}
.problems{color:#b45309}
"""


def _rate(summary: dict, events: list[CaseEvent], tmax: float) -> str:
    """The run's own figure (over its wall time, engine start-up included) where it wrote one."""
    rate = summary.get("cases_per_min")
    if isinstance(rate, (int, float)):
        return f"{rate:.1f}"
    return f"{60 * len(events) / tmax:.1f}" if events else "—"


def render(c: LoadedRun) -> str:
    s = c.summary
    events = c.events
    tmax = max([e.t for e in events] + [float(s.get("elapsed_s") or 0.0) if c.kind == "fuzz" else 0.0, 1.0])
    firsts = first_seen(events)
    ttff = s.get("time_to_first_finding_s")
    if ttff is None and firsts:
        ttff = firsts[0][1]
    n_cases = len(events) or s.get("cases", 0)
    n_findings = s.get("findings", len(firsts))
    status = _bars_status(events)
    gen = [e for e in events if e.phase == "generate"]
    combos = {(e.layers, e.kv_cache_dtype, e.prefix_caching) for e in gen}
    secs = sum(e.seconds for e in events)
    title = f"hybridfuzz {c.kind} {os.path.basename(os.path.abspath(c.path))}"
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title><style>{CSS}</style></head><body><main>"]
    parts.append(f"<h1>{_e(title)}</h1>")
    facts = [f"started {s['started']}" if s.get("started") else "", f"engine {s['engine']}" if s.get("engine") else "",
             f"vLLM {s['vllm']}" if s.get("vllm") else "", f"seed {s['seed']}" if s.get("seed") is not None else "",
             f"{s['workers']} workers" if c.kind == "campaign" and s.get("workers") else "",
             f"budget {_fmt_s(s['budget_s'])}" if s.get("budget_s") else "",
             f"ran {_fmt_s(s.get('elapsed_s') or s.get('spent_s') or tmax)}",
             f"shrinking {_fmt_s(s['shrink_s'])}" if s.get("shrink_s") else ""]
    parts.append(f'<p class="sub">{_e(" · ".join(f for f in facts if f))}</p>')
    if c.problems:
        parts.append('<p class="problems">' + "<br>".join(_e(p) for p in c.problems) + "</p>")
    label = "findings"
    if c.kind == "campaign":  # reported = replayed on a fresh engine; open ones are still shrinking
        label = f"findings reported ({sum(1 for v in c.states.values() if v == 'open')} open)"
    cards = [("cases run", n_cases, False), (label, n_findings, bool(n_findings)), ("time to first finding", _fmt_s(ttff), False),
             ("configurations covered", len(combos), False), ("cases / min", _rate(s, events, tmax), False)]
    parts.append('<div class="cards">' + "".join(f'<div class="card{" bad" if bad else ""}"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
                                               for k, v, bad in cards) + "</div>")
    parts.append("<h2>Findings over time</h2>")
    parts.append('<div class="legend"><span><i style="background:#d1495b"></i>distinct findings (signatures)</span>'
                 '<span><i style="background:#2563eb"></i>cases run (right axis)</span><span><i style="background:#f59e0b"></i>first finding</span></div>')
    parts.append(plot_findings_over_time(events, first=ttff))
    parts.append("<h2>Time to first finding, per signature</h2>")
    parts.append(plot_time_to_find(events, tmax))
    parts.append("<h2>Configuration space covered</h2>")
    parts.append('<p class="note">Generated cases (shrinking runs left out) by KV-cache dtype × prefix caching (columns) and layer pattern (rows).</p>')
    parts.append(plot_coverage(events))
    parts.append("<h3>Step sequences</h3>")
    parts.append(plot_steps(events))
    parts.append(f'<p class="note">{status["pass"]} pass, {status["divergence"]} divergent, {status["unsupported"]} unsupported runs; '
                 f'{secs:.0f} s of engine time.</p>')
    workers = s.get("per_worker") if c.kind == "campaign" else None
    if isinstance(workers, dict) and workers:
        parts.append("<h2>Workers</h2>")
        rows = "".join(f"<tr><td>{_e(i)}</td><td>{_e(w.get('cases', 0))}</td><td>{_e(w.get('shrink_cases', 0))}</td>"
                       f"<td>{_e(_fmt_s(w.get('busy_s')))}</td><td>{_e(w.get('starts', 0))}</td></tr>" for i, w in workers.items())
        parts.append("<table><tr><th>worker</th><th>cases</th><th>of them shrinking</th><th>busy</th><th>starts</th></tr>" + rows + "</table>")
    parts.append("<h2>Findings</h2>")
    if c.findings:
        hit = {sig: (t, n) for sig, t, n in firsts}
        rows = []
        state_col = bool(c.states)
        def first_found(item) -> float:
            case = item[1]
            sigs = [o.signature for o in getattr(case, "observed", []) if o.verdict == "divergence"]
            return hit.get(sigs[-1], (float("inf"), 0))[0] if sigs else float("inf")

        for name, case in sorted(c.findings, key=first_found):
            if isinstance(case, str):
                rows.append(f"<tr><td><code>{_e(name)}</code></td><td colspan={4 if state_col else 3} class=problems>{_e(case)}</td></tr>")
                continue
            obs = [o for o in case.observed if o.verdict == "divergence"]
            o = obs[-1] if obs else None
            sig = o.signature if o else ""
            t, n = hit.get(sig, (None, 0))
            state = f"<td>{_e(c.states.get(sig, '—'))}</td>" if state_col else ""
            rows.append(f"<tr><td><code>{_e(sig or name)}</code><br><a href=\"{_e(name)}\">{_e(os.path.basename(name))}</a></td>{state}"
                        f"<td>{_e(o.summary if o else '(no divergence recorded)')}</td><td>{_e(_fmt_s(t))}</td><td>{n}</td></tr>")
        head = "<th>signature / case</th>" + ("<th>state</th>" if state_col else "") + "<th>summary</th><th>first found</th><th>hits</th>"
        parts.append(f"<table><tr>{head}</tr>" + "".join(rows) + "</table>")
    else:
        parts.append('<p class="empty">No finding files.</p>')
    parts.append("</main></body></html>")
    return "\n".join(parts)
