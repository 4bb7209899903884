"""Triage by shared features, on a real campaign's committed findings and events (the H200, vLLM 0.32.0,
2026-12-03, tests/data/campaign-h200-vllm0.32.0-2026-12-03): what was seen there by hand must come out of the data."""
import json
import os
import subprocess
import sys

from hybridfuzz.triage.shared_features import MIN_SHARED, finding_events, kv_scales, shared_features, tail

RUN = os.path.join(os.path.dirname(__file__), "data", "campaign-h200-vllm0.32.0-2026-12-03")


def test_the_binomial_tail_and_the_kv_scale_kinds():
    assert abs(tail(0, 5, 0.3) - 1.0) < 1e-12 and abs(tail(6, 6, 0.42) - 0.42 ** 6) < 1e-12 and tail(3, 3, 0.0) == 0.0
    assert [kv_scales(d) for d in ("auto", "bfloat16", "fp8_e4m3", "int4_per_token_head", "nvfp4")] == \
        ["none", "none", "per-tensor", "per-token-head", "block"]


def test_replaced_distributions_of_the_h200_campaign_share_the_per_token_head_kv_dtypes():
    classes = [c for c, _ in finding_events(RUN)]
    assert classes.count("self_consistency:outside-top-k") == 6 and classes.count("self_consistency:drift") == 16
    shared, tested = shared_features(RUN)
    lines = {(s.finding_class, s.feature, s.value): s for s in shared}
    top = lines[("self_consistency:outside-top-k", "kv_scales", "per-token-head")]
    assert (top.findings_with, top.findings) == (6, 6) and 0.41 < top.case_fraction < 0.43 and top.p < 0.01
    assert tested > 50 and all(s.findings_with >= MIN_SHARED and s.findings_with / s.findings > s.case_fraction for s in shared)
    # the events of that campaign predate the weights field: no base rate, so no claim about fp8 weights
    assert not any(s.feature in ("weights", "backend") for s in shared)


def test_campaign_status_prints_them():
    r = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "campaign-status", "--dir", RUN, "--shared", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    found = json.loads(r.stdout)["shared_features"]["found"]
    assert any((f["finding_class"], f["feature"], f["value"], f["findings_with"]) ==
               ("self_consistency:outside-top-k", "kv_scales", "per-token-head", 6) for f in found), found


def test_one_token_prompts_are_recorded_as_a_feature():
    """The 4 one-token-prompt findings of the 0.33.0 campaign of 2026-12-04 were grouped by hand: each event now says
    whether its case had a 1-token prompt, so the next run's report can find what they share."""
    from hybridfuzz.campaign.records import CaseEvent
    from hybridfuzz.case import load_case_file
    from hybridfuzz.triage.shared_features import FEATURES

    found = os.path.join(os.path.dirname(__file__), "data", "findings-h200-vllm0.33.0-2026-12-04")
    one = load_case_file(os.path.join(found, "self_consistency_first-request-differs_ffb181bb.yaml"))
    long = load_case_file(os.path.join(found, "self_consistency_repeat-differs_c5daf501.yaml"))
    events = [CaseEvent.of(c, "divergence", "", 0.0, 0.0, "generate") for c in (one, long)]
    assert [FEATURES["one_token_prompt"](e) for e in events] == ["yes", "no"]
    assert [CaseEvent.from_dict(json.loads(e.to_json())).one_token_prompt for e in events] == ["yes", "no"]
    assert CaseEvent.from_dict({"t": 1.0}).one_token_prompt == ""  # older events: not recorded, no base rate
