"""hybridfuzz export: the issue body, and a standalone script that reproduces with vLLM alone."""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import subprocess
import sys

import pytest

from hybridfuzz import cli, export
from hybridfuzz.case import Observation, load_case
from hybridfuzz.model import ModelSpec, build_model

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


def write_script(tmp_path, text: str, name: str = "repro.py") -> str:
    path = tmp_path / name
    path.write_text(export.standalone_script(load_case(text), title="test", script_name=name))
    return str(path)


def load_script_module(path: str):
    spec = importlib.util.spec_from_file_location("exported_repro", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("text", [FAIL_CASE, REFERENCE_CASE], ids=["health-finding", "reference-case"])
def test_script_is_standalone_python(tmp_path, text):
    src = open(write_script(tmp_path, text)).read()
    tree = ast.parse(src)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "hybridfuzz" not in imported
    assert imported <= {"__future__", "hashlib", "json", "math", "multiprocessing", "os", "queue", "re", "sys", "tempfile", "time",
                        "dataclasses", "types", "torch", "safetensors", "vllm", "traceback", "inspect"}
    assert 'if __name__ == "__main__":' in src
    assert 'sys.modules.setdefault(_name, None)' in src  # its own torchvision guard


def test_script_model_bytes_match_builder(tmp_path):
    """The script's model directory is byte-identical to build_model(spec), in a process without hybridfuzz."""
    case = load_case(REFERENCE_CASE)
    path = write_script(tmp_path, REFERENCE_CASE)
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


def _run(steps, lps=None):
    return {"outcome": "ok", "error": "", "where": "", "steps": [
        {"index": i, "kind": "generate", "outputs": [{"tokens": t, "logprobs": lps or [[[x, -0.1], [999, -5.0]] for x in t],
                                                      "num_cached_tokens": 0} for t in outs]} for i, outs in steps]}


def test_script_oracle_logic(tmp_path):
    """The script's self-contained oracle agrees with the rules of oracles/ on synthetic runs."""
    mod = load_script_module(write_script(tmp_path, REFERENCE_CASE))
    # steps 0 and 4 generate; step 0 prompt 0 == step 4 prompt 0
    same = _run([(0, [[1, 2, 3, 4, 5, 6, 7, 8], [4, 4, 5, 6, 7, 8, 9, 9]]), (4, [[1, 2, 3, 4, 5, 6, 7, 8]])])
    assert mod.judge(same, same)[0] == "pass"
    differs = _run([(0, [[1, 2, 3, 4, 5, 6, 7, 8], [4, 4, 5, 6, 7, 8, 9, 9]]), (4, [[1, 2, 9, 4, 5, 6, 7, 8]])])
    status, summary, evidence = mod.judge(differs, same)
    assert status == "divergence" and "identical prompt" in summary and "from token 2" in summary
    degenerate = _run([(0, [[3, 3, 3, 3, 3, 3, 3, 3], [4, 4, 5, 6, 7, 8, 9, 9]]), (4, [[3, 3, 3, 3, 3, 3, 3, 3]])])
    status, summary, _ = mod.judge(degenerate, same)
    assert status == "divergence" and "degenerate" in summary
    crashed = {"outcome": "crash", "steps": [], "error": "engine process died with exit code -11", "where": "?"}
    assert mod.judge(crashed, None)[0] == "divergence"
    refused = {"outcome": "rejected", "steps": [], "error": "ValueError: no", "where": "start-up"}
    assert mod.judge(refused, None)[0] == "unsupported"
    assert mod.REFERENCE_ENGINE["kv_cache_dtype"] == "auto" and mod.ENGINE["kv_cache_dtype"] == "fp8"
    assert [next(iter(s)) for s in mod.STEPS] == ["generate", "sleep", "wake_up", "reset_prefix_cache", "generate"]


def test_issue_markdown_shape():
    case = load_case(FAIL_CASE)
    body = export.issue_markdown(case, case_name="max-logprobs.yaml", env_text="ENV-TEXT", env={"vLLM": "0.32.0", "GPU": "none"},
                                 script_output="REPRODUCED: x", script_rc=1)
    title = body.splitlines()[0]
    assert title.startswith("# [Bug]: ") and "VLLMValidationError" in title and "max_logprobs=2" in title
    for section in ("### Your current environment", "### 🐛 Describe the bug", "**Expected**", "**Observed**", "ENV-TEXT",
                    "```python", "```yaml", "vLLM 0.32.0: expected pass", "health:error:VLLMValidationError:88da12df",
                    "exit code 1: reproduces it", "### Before submitting a new issue"):
        assert section in body, section
    script = body.split("```python\n", 1)[1].split("\n```", 1)[0]
    ast.parse(script)
    yaml_text = body.split("```yaml\n", 1)[1].split("\n```", 1)[0]
    assert load_case(yaml_text) == case


def test_component_cases_are_refused():
    case = load_case(FAIL_CASE).replace(kind="component", component={"name": "x"})
    with pytest.raises(ValueError):
        export.standalone_script(case)


def test_cli_export_writes_files(tmp_path):
    (tmp_path / "c.yaml").write_text(FAIL_CASE)
    rc = cli.main(["export", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "issue.md"), "--script", str(tmp_path / "r.py"), "--no-collect-env"])
    assert rc == 0
    body = (tmp_path / "issue.md").read_text()
    assert (tmp_path / "r.py").read_text() in body


@pytest.mark.engine
def test_exported_script_reproduces_without_hybridfuzz(tmp_path):
    """The CPU finding reproduces from the exported script alone, in a process that cannot import hybridfuzz."""
    path = write_script(tmp_path, FAIL_CASE)
    out = subprocess.run([sys.executable, path], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr[-3000:]
    assert "REPRODUCED: case error at step 0 (generate): VLLMValidationError" in out.stdout
    # and the same case without the fault does not reproduce (exit 0)
    fixed = FAIL_CASE.replace("extra: {max_logprobs: 2}", "extra: {max_logprobs: 8}")
    path = write_script(tmp_path, fixed, "fixed.py")
    out = subprocess.run([sys.executable, path], env=blocked_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "NOT REPRODUCED" in out.stdout and "[case] step 0 req 0: tokens [" in out.stdout
