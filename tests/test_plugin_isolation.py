"""Installing hybridfuzz must not change unrelated vLLM runs (issue #14, defect 6).

vLLM loads every ``vllm.general_plugins`` entry point in each engine process of
the environment; hybridfuzz's must leave such a process as it found it unless
HYBRIDFUZZ_FAULT is set. Checked in a fresh interpreter, the way vLLM loads it.
"""
import json
import os
import subprocess
import sys

PROBE = r"""
import json, os, sys
from importlib.metadata import entry_points

def snap():
    return {"environ": dict(os.environ), "path": list(sys.path), "meta_path": [repr(f) for f in sys.meta_path],
            "blocked": sorted(k for k, v in sys.modules.items() if v is None and k in ("torchvision", "torchaudio", "torchcodec"))}

before = snap()
eps = [e for e in entry_points(group="vllm.general_plugins") if e.value.startswith("hybridfuzz")]
for ep in eps:
    ep.load()()          # what vllm.plugins.load_general_plugins does
after = snap()
print(json.dumps({"entry_points": [e.value for e in eps], "before": before, "after": after}))
"""


def _probe(env):
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_plugin_entry_point_has_no_side_effects_without_a_fault():
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRIDFUZZ_")}
    env.pop("PYTHONPATH", None)  # as an unrelated vLLM run would start
    out = _probe(env)
    assert out["entry_points"] == ["hybridfuzz.faults:register"], out["entry_points"]
    for key in ("environ", "path", "meta_path", "blocked"):
        assert out["before"][key] == out["after"][key], key


def test_guard_is_installed_by_hybridfuzz_entry_points_only():
    """The contrast that makes the test above able to fail: install() does change the process."""
    code = ("import os, sys; from hybridfuzz import _guard; before = os.environ.get('PYTHONPATH');"
            "_guard.install(); print(before != os.environ.get('PYTHONPATH') or not _guard._needed())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYBRIDFUZZ_ALLOW_VISION")})
    assert r.stdout.strip() == "True", r.stderr
