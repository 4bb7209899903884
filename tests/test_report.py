"""hybridfuzz report: a self-contained HTML page with inline SVG plots for a fuzz or campaign directory."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import pytest

from demo_runs import write_demo_campaign, write_demo_fuzz

from hybridfuzz import cli
from hybridfuzz.campaign.records import CaseEvent
from hybridfuzz.case import load_case_file
from hybridfuzz.report import page, plots


@pytest.fixture(params=["fuzz", "campaign"])
def campaign(request, tmp_path):
    write = write_demo_fuzz if request.param == "fuzz" else write_demo_campaign
    return write(str(tmp_path / request.param), seed=1, n=120)


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, flags=re.S)


def test_report_reads_every_worker_of_a_run(campaign):
    c = page.load_run(campaign)
    assert not c.problems and c.findings and all(not isinstance(case, str) for _, case in c.findings)
    files = [os.path.join(campaign, "events.jsonl")] + [os.path.join(campaign, "workers", w, "events.jsonl")
                                                         for w in sorted(os.listdir(os.path.join(campaign, "workers")))
                                                         if os.path.isdir(os.path.join(campaign, "workers"))] \
        if os.path.isdir(os.path.join(campaign, "workers")) else [os.path.join(campaign, "events.jsonl")]
    lines = sum(1 for f in files if os.path.exists(f) for _ in open(f))
    assert len(c.events) == lines > 0
    assert [e.t for e in c.events] == sorted(e.t for e in c.events)  # one time axis across workers and restarts
    if c.kind == "campaign":
        assert {e.worker for e in c.events} == {"0", "1"}
        assert sorted(c.states.values()) == ["open", "replayed"]


def test_step_names_are_the_same_for_writer_and_reader():
    case = load_case_file("corpus/gpu/wake-up-zero-list-vllm-0.26.0.yaml")
    e = CaseEvent.of(case, "pass", "", 1.0, 1.0, "generate")
    assert set(e.steps) <= {"generate", "sleep", "wake_up", "reset_prefix_cache"} and "wake_up" in e.steps
    back = CaseEvent.from_dict(json.loads(e.to_json()))
    assert back == e
    assert plots._short_steps(back.steps) == plots._short_steps(("sleep", "wake_up")) or "wake" in plots._short_steps(back.steps)
    old = CaseEvent.from_dict({"t": 1, "steps": "Generate,Sleep,WakeUp,ResetPrefixCache"})  # files written before the names were unified
    assert old.steps == ("generate", "sleep", "wake_up", "reset_prefix_cache")


def test_report_html(campaign):
    c = page.load_run(campaign)
    html = page.render(c)
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    # self-contained: no scripts, stylesheets, images or fonts from elsewhere
    assert not re.search(r"<script|<link|<img|@import|url\(", html)
    svgs = _svgs(html)
    labels = [re.search(r'aria-label="([^"]+)"', s).group(1) for s in svgs]
    assert labels == ["findings over time", "time to first finding per signature",
                      "coverage: KV dtype x layer pattern x prefix caching", "step sequences covered"]
    for s in svgs:  # each plot is well-formed XML
        ET.fromstring(s)
    first = c.summary["time_to_first_finding_s"]
    if first is not None:
        assert f"first finding {page._fmt_s(first)}" in html
    for sig, _, _ in page.first_seen(c.events):
        assert sig in html
    # coverage: every KV dtype of a generated case is a column
    for dtype in {e.kv_cache_dtype for e in c.events if e.phase == "generate"}:
        assert f'class="coltop"><title>{dtype}</title>' in html
    # the red corner marks appear exactly where generated cases diverged
    assert html.count('class="corner"') == len({(e.layers, e.kv_cache_dtype, e.prefix_caching) for e in c.events
                                                 if e.phase == "generate" and e.status == "divergence"})


def test_plot_numbers():
    events = [CaseEvent.from_dict(d) for d in (
        {"t": 10, "status": "pass", "signature": ""}, {"t": 20, "status": "divergence", "signature": "a:x:1"},
        {"t": 30, "status": "divergence", "signature": "a:x:1"}, {"t": 40, "status": "divergence", "signature": "b:y:2"})]
    assert plots.first_seen(events) == [("a:x:1", 20.0, 2), ("b:y:2", 40.0, 1)]
    svg = plots.plot_findings_over_time(events, first=20.0)
    assert svg.count('class="dot-found"') == 2 and "first finding 20 s" in svg
    assert plots._short_steps(("generate", "generate", "sleep", "wake_up", "generate")) == "gen×2 → sleep → wake → gen"
    assert plots._time_ticks(1800) == [0, 600, 1200, 1800] and plots._time_ticks(50) == [0, 10, 20, 30, 40, 50]


def test_empty_and_broken_campaigns(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    html = page.render(page.load_run(str(d)))
    assert "summary.json" in html and "No findings in this run." in html and "No generated cases." in html
    (d / "summary.json").write_text(json.dumps({"cases": 1, "findings": 0, "time_to_first_finding_s": None}))
    (d / "events.jsonl").write_text('{"t": 1, "phase": "generate", "status": "pass", "signature": "", "kv_cache_dtype": "auto", '
                                    '"layers": "LF", "prefix_caching": null, "steps": "generate", "seconds": 1}\nnot json\n')
    c = page.load_run(str(d))
    assert c.problems == ["events.jsonl line 2: not an event"]
    html = page.render(c)
    assert len(_svgs(html)) == 3 and "—" in html  # no time to first finding


def test_cli_report(campaign, capsys):
    assert cli.main(["report", campaign]) == 0
    out = capsys.readouterr().out.strip()
    assert out == os.path.join(campaign, "report.html") and os.path.getsize(out) > 5000


def test_cli_report_refuses_what_is_not_a_run(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    for target in (tmp_path / "f", tmp_path / "missing", tmp_path):
        assert cli.main(["report", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("hybridfuzz: "), err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here")
def test_report_renders_in_headless_chromium(campaign, tmp_path):
    """The page renders with its plots: the screenshot holds the plot colours (red findings line, blue heat map cells)."""
    from PIL import Image

    html_path = os.path.join(campaign, "report.html")
    with open(html_path, "w") as f:
        f.write(page.render(page.load_run(campaign)))
    png = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tempfile.mkdtemp()}", f"--screenshot={png}", "--window-size=1200,2400", f"file://{html_path}"],
                   capture_output=True, timeout=120)
    assert png.exists()
    im = Image.open(png).convert("RGB").resize((300, 600))
    colours = set(im.getdata())
    near = lambda c, ref: all(abs(a - b) < 30 for a, b in zip(c, ref))  # noqa: E731
    assert any(near(c, (209, 73, 91)) for c in colours), "no findings-red on the page"
    assert any(near(c, (76, 154, 95)) for c in colours), "no pass-green bars"
    assert sum(1 for c in colours if c[2] > c[0] + 60) > 20, "no blue heat-map cells"
