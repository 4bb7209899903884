"""The pure comparison rule on small hand-made results, as vLLM's tests/models/utils.py
functions are tested: each rule must both pass and fail. (The oracles on real engine
traces are exercised in test_fault_detection.py and test_replay_cli.py.)"""
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
