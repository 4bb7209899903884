"""The reproducer's decision (export/signature_check.py): exit 1 only for the bug's own signature, 0 for a pass, 3 for
anything else. Pure: Verdict objects, no engine. The GPU export that printed ``REPRODUCED: [health] case error at
start-up: ModuleNotFoundError: No module named 'torchvision.transforms'`` and exited 1 is the case this guards."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hybridfuzz.export.signature_check import DID_NOT_RUN, NOT_REPRODUCED, REPRODUCED, Expected, decide, expected_of, message_pattern
from hybridfuzz.oracles.verdict import Verdict

NAN = expected_of("health:nonfinite:8abdf458", "case step 0 request 0: non-finite logprob at token 2", "health")
SHAPE = ("case error at start-up: RuntimeError: shape '[10810, 2, 128, 512]' is invalid for input of size 1073735680 "
         "(at vllm/v1/worker/gpu/attn_utils.py:251 in _reshape_attention_kv_cache)")
ERROR = expected_of("health:error:RuntimeError:d6d37bcb", SHAPE, "health")


def error(etype: str, summary: str) -> Verdict:
    return Verdict("divergence", "health", summary, symptom=f"error:{etype}", where="start-up:f")


def test_expected_of_reads_the_recorded_observation():
    assert NAN == Expected("health:nonfinite:8abdf458", "health", "nonfinite")
    assert (ERROR.symptom, ERROR.place, ERROR.error_type) == ("error:RuntimeError", "start-up", "RuntimeError")
    crash = expected_of("health:crash:SIGILL:b5737524", "case crash at step 0 (generate): SIGILL: engine process died by signal SIGILL "
                        "(step 0 (generate))", "health")
    assert (crash.symptom, crash.place, crash.error_type, crash.message) == ("crash:SIGILL", "generate", "SIGILL", "")
    comp = expected_of("component:scale_view_fill:overwrites-live-gdn-state:e3ed5683", "changed 256 bytes", "component:scale_view_fill")
    assert (comp.oracle, comp.symptom) == ("component:scale_view_fill", "overwrites-live-gdn-state")  # an oracle with a colon


def test_message_pattern_masks_numbers_and_keeps_words():
    pat = message_pattern("shape '[10810, 2, 128, 512]' is invalid for input of size 1073735680")
    import re

    assert re.search(pat, "shape '[9, 2, 64, 512]' is invalid for input of size 12")
    assert not re.search(pat, "shape '[9, 2, 64, 512]' is valid")


def test_pass_is_not_reproduced():
    d = decide(NAN, Verdict("pass", "health, self_consistency", "no divergence (health, self_consistency)"))
    assert d.exit_code == NOT_REPRODUCED and d.line == "NOT REPRODUCED: [health, self_consistency] no divergence (health, self_consistency)"


def test_the_bugs_own_symptom_reproduces():
    d = decide(NAN, Verdict("divergence", "health", "case step 0 request 0: non-finite logprob at token 1", symptom="nonfinite",
                            where="generate@qwen3_next/turboquant_k8v4"))
    assert d.exit_code == REPRODUCED and d.line.startswith("REPRODUCED: [health] case step 0 request 0: non-finite")
    same = error("RuntimeError", SHAPE.replace("10810", "999").replace(":251", ":262"))  # numbers and lines may differ
    assert decide(ERROR, same).exit_code == REPRODUCED


@pytest.mark.parametrize("verdict, why", [
    # the GPU export's failure: a half-installed torchvision at start-up, not the bug
    (error("ModuleNotFoundError", "case error at start-up: ModuleNotFoundError: No module named 'torchvision.transforms'; "
                                  "'torchvision' is not a package"), "health:error:ModuleNotFoundError, the bug is health:nonfinite"),
    # too little memory for the KV cache: vLLM's start-up error, not the bug
    (error("ValueError", "case error at start-up: ValueError: Available memory on node 0 (20.1/23.5 GiB) on kv cache allocation is "
                         "less than requested memory for kv (97656.2 GiB)."), "health:error:ValueError"),
    # the engine refused the dtype (a newer vLLM, or an older CPU)
    (Verdict("unsupported", "health", "the engine refused the case configuration: NotImplementedError: FP8 KV cache on CPU requires "
             "x86 with AVX-512 or AMX.", symptom="rejected"), "the engine refused"),
    # a hang that is not the bug's
    (Verdict("divergence", "health", "case timeout at step 0 (generate): Timeout: no result within 600 s; engine killed",
             symptom="timeout:Timeout", where="generate:"), "health:timeout:Timeout"),
    # another symptom of the same case
    (Verdict("divergence", "self_consistency", "identical prompt (len 3) gave different output", symptom="first-request-differs"),
     "self_consistency:first-request-differs"),
])
def test_anything_else_did_not_run(verdict, why):
    d = decide(NAN, verdict)
    assert d.exit_code == DID_NOT_RUN and d.line.startswith("DID NOT RUN: ") and why in d.line and "\n" not in d.line


def test_an_error_must_match_type_place_and_message():
    other_message = error("RuntimeError", "case error at start-up: RuntimeError: CUDA driver version is insufficient")
    assert decide(ERROR, other_message).exit_code == DID_NOT_RUN and "another message" in decide(ERROR, other_message).line
    later = Verdict("divergence", "health", SHAPE.replace("at start-up", "at step 0 (generate)"), symptom="error:RuntimeError")
    assert decide(ERROR, later).exit_code == DID_NOT_RUN and "the bug's is at start-up" in decide(ERROR, later).line


def test_without_a_recorded_signature_a_missing_module_still_did_not_run():
    missing = error("ModuleNotFoundError", "case error at start-up: ModuleNotFoundError: No module named 'torchvision.transforms'")
    assert decide(None, missing).exit_code == DID_NOT_RUN
    assert decide(None, error("RuntimeError", SHAPE)).exit_code == REPRODUCED


def test_the_scripts_decide_is_this_one():
    """The exported script's copy decides as this module does (inline.py copies its source)."""
    from test_export import FAIL_CASE, load_script

    from hybridfuzz.case import load_case
    from hybridfuzz.export import standalone_script

    mod = load_script(standalone_script(load_case(FAIL_CASE)))
    assert mod.EXPECTED == {"signature": "health:error:VLLMValidationError:88da12df", "oracle": "health", "symptom": "error:VLLMValidationError",
                            "place": "generate", "error_type": "VLLMValidationError",
                            "message": r"Requested sample logprobs of \d+, which is greater than max allowed: \d+"}
    for v in (error("ModuleNotFoundError", "case error at start-up: ModuleNotFoundError: No module named 'x'"),
              Verdict("pass", "health", "case healthy"),
              Verdict("divergence", "health", "case error at step 0 (generate): VLLMValidationError: Requested sample logprobs of 5, which "
                      "is greater than max allowed: 2", symptom="error:VLLMValidationError")):
        mine = decide(Expected(**mod.EXPECTED), v)
        theirs = mod.decide(mod.Expected(**mod.EXPECTED), mod.Verdict(v.status, v.oracle, v.summary, symptom=v.symptom, where=v.where))
        assert (theirs.exit_code, theirs.line) == (mine.exit_code, mine.line)


def test_the_guard_blocks_submodules_and_only_on_a_cpu_torch(monkeypatch):
    """hybridfuzz/_guard.py blocks ``torchvision.transforms`` as well as ``torchvision`` (the half-installed torchvision of
    the GPU host failed on the submodule), and only where torch is a CPU build: the script copies it, so on a CUDA host
    it blocks nothing, as hybridfuzz does there."""
    probe = ("from hybridfuzz._guard import _needed, block_here\nblock_here()\nimport importlib\n"
             "for name in ('torchvision', 'torchvision.transforms', 'torchaudio.functional'):\n"
             "    try:\n        importlib.import_module(name)\n        print(name, 'imported')\n"
             "    except ImportError as e:\n        print(name, 'blocked:', type(e).__name__)\n")
    env = {k: v for k, v in os.environ.items() if k != "HYBRIDFUZZ_ALLOW_VISION"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120).stdout
    from hybridfuzz import _guard

    if _guard._needed():
        assert out.splitlines() == ["torchvision blocked: ModuleNotFoundError", "torchvision.transforms blocked: ModuleNotFoundError",
                                    "torchaudio.functional blocked: ModuleNotFoundError"], out
    from test_export import FAIL_CASE, load_script

    from hybridfuzz.case import load_case
    from hybridfuzz.export import standalone_script

    mod = load_script(standalone_script(load_case(FAIL_CASE)))
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "2.13.0+cu130")
    assert mod._needed() is False and _guard._needed() is False
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: "2.13.0+cpu")
    assert mod._needed() is True and _guard._needed() is True
