"""ServerHost drives a real ``vllm serve`` on CPU: outcomes ok / error / crash / rejected.

Each case starts its own server (about 30-90 s on a small CPU box), so the
assertions share as few cases as possible. The quick tests at the top need no engine.
"""
from __future__ import annotations

import os
import time

import pytest

import hybridfuzz  # noqa: F401  (torchvision guard before anything imports vLLM)
from hybridfuzz.case import Case, EngineConfig, Generate, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp
from hybridfuzz.engines.server import ServerHost, parse_completion, root_cause, server_args
from hybridfuzz.hosts import HOSTS, make_host
from hybridfuzz.model import ModelSpec

PROMPT = list(range(7, 47))
SHORT = list(range(100, 120))


def _ok_case() -> Case:
    gen = Generate(prompts=[PROMPT, SHORT], max_tokens=4, logprobs=3)
    return Case(model=ModelSpec(), engine=EngineConfig(enable_prefix_caching=True),
                steps=[gen, gen, ResetPrefixCache(), Sleep(level=1), WakeUp(tags=["weights"]), WakeUp(), gen])


# ---------------------------------------------------------------- no engine

def test_registered():
    assert "server" in HOSTS
    assert isinstance(make_host("server", timeout=12), ServerHost)


def test_server_args_mirror_engine_config():
    eng = EngineConfig(kv_cache_dtype="fp8", enable_prefix_caching=False, block_size=32, enforce_eager=True,
                       mamba_cache_mode="align", extra={"compilation_config": {"mode": 0}, "enable_chunked_prefill": False})
    args = server_args(Case(model=ModelSpec(), steps=[Generate(prompts=[[1]])], engine=eng), "/m", 1234)
    joined = " ".join(args)
    assert args[:2] == ["serve", "/m"] and "--host 127.0.0.1 --port 1234" in joined
    for part in ("--kv-cache-dtype fp8", "--no-enable-prefix-caching", "--block-size 32", "--enforce-eager",
                 "--mamba-cache-mode align", "--skip-tokenizer-init", "--max-num-seqs 8", "--max-model-len 512",
                 "--seed 0", "--enable-prompt-tokens-details", '--compilation-config {"mode": 0}', "--no-enable-chunked-prefill"):
        assert part in joined, part


def test_parse_completion_best_first():
    resp = {"choices": [{"token_ids": [5, 9], "logprobs": {"tokens": ["token_id:5", "token_id:9"], "top_logprobs": [
        {"token_id:3": -2.0, "token_id:5": -0.5, "token_id:4": -2.0}, {"token_id:9": -0.1}]}}],
        "usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}}
    r = parse_completion(resp, 3)
    assert r.tokens == [5, 9] and r.num_cached_tokens == 0 and r.prompt_len == 3
    assert r.logprobs == [[[5, -0.5], [3, -2.0], [4, -2.0]], [[9, -0.1]]]


def test_root_cause_skips_wrappers_and_warnings():
    log = "\n".join([
        "(APIServer pid=1) WARNING 11-30 00:08:26 [base.py:380] ValueError: Tokenizer not available",
        "(Worker pid=3) ERROR 11-30 00:08:33 [multiproc_executor.py:1063]   File \"/x/site-packages/torch/nn/functional.py\", line 2615, in embedding",
        "(Worker pid=3) ERROR 11-30 00:08:33 [multiproc_executor.py:1063] IndexError: index out of range in self",
        "(EngineCore pid=2) ERROR 11-30 00:08:33 [core.py:1512] RuntimeError: Worker failed with error 'index out of range in self'",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ])
    info = root_cause(log)
    assert (info.type, info.message, info.where) == ("IndexError", "index out of range in self", "torch/nn/functional.py:2615 in embedding")


# ---------------------------------------------------------------- real server

@pytest.fixture(scope="module")
def ok_trace():
    with ServerHost(timeout=400) as host:
        t0 = time.perf_counter()
        trace = host.run(_ok_case())
        trace.timings["test_wall_s"] = time.perf_counter() - t0
    print(f"\nserver case: startup {trace.timings['startup_s']:.1f} s, steps {trace.timings['steps_s']:.2f} s, "
          f"total {trace.timings['total_s']:.1f} s; settings {trace.engine_settings}")
    return trace


@pytest.mark.smoke  # the fast tier's real-engine test of this behaviour (conftest.py)
@pytest.mark.engine
def test_ok_case_is_self_consistent(ok_trace):
    assert ok_trace.outcome == "ok", (ok_trace.error, ok_trace.log_tail[-2000:])
    assert [s.kind for s in ok_trace.steps] == ["generate", "generate", "reset_prefix_cache", "sleep", "wake_up", "wake_up", "generate"]
    gens = [outs for _, outs in ok_trace.generate_results()]
    assert len(gens) == 3 and all(len(o) == 2 for o in gens)
    first = gens[0]
    assert [len(r.tokens) for r in first] == [4, 4] and [r.prompt_len for r in first] == [40, 20]
    assert all(len(r.logprobs) == 4 and r.logprobs[0][0][0] == r.tokens[0] for r in first)  # greedy = best first
    assert all(len(pos) >= 3 for r in first for pos in r.logprobs)
    for later in gens[1:]:
        assert [r.tokens for r in later] == [r.tokens for r in first]
        assert [r.logprobs for r in later] == [r.logprobs for r in first]
    assert all(r.num_cached_tokens is not None for outs in gens for r in outs)
    assert ok_trace.engine_settings["block_size"] >= 16 and ok_trace.engine_settings["max_model_len"] == 512
    assert ok_trace.env["device"] == "cpu" and ok_trace.env["vllm"]


@pytest.mark.engine
def test_server_matches_offline_forkserver(ok_trace):
    assert ok_trace.outcome == "ok"
    with make_host("forkserver", timeout=400) as fs:
        offline = fs.run(_ok_case())
    assert offline.outcome == "ok", offline.error
    served = [[r.tokens for r in outs] for _, outs in ok_trace.generate_results()]
    local = [[r.tokens for r in outs] for _, outs in offline.generate_results()]
    assert served == local
    diff = max(abs(a[1] - b[1]) for (_, so), (_, lo) in zip(ok_trace.generate_results(), offline.generate_results())
               for s, o in zip(so, lo) for sp, op in zip(s.logprobs, o.logprobs) for a, b in zip(sp, op))
    print(f"\nmax |logprob| difference server vs offline: {diff:.3g}")
    assert diff < 0.05


@pytest.mark.engine
def test_http_error_and_killed_server():
    """A 400 answer is a step error (outcome error); a server killed mid-case is a crash."""
    too_long = Case(model=ModelSpec(), steps=[Generate(prompts=[PROMPT], max_tokens=2),
                                              Generate(prompts=[PROMPT], max_tokens=600), ResetPrefixCache()])
    killed = Case(model=ModelSpec(), steps=[Generate(prompts=[PROMPT], max_tokens=2), ResetPrefixCache(),
                                            Generate(prompts=[PROMPT], max_tokens=2)])

    def kill_before_step_2(index, step, server):
        if index == 2:
            server.kill()

    err = ServerHost(timeout=400).run(too_long)
    crash = ServerHost(timeout=400, before_step=kill_before_step_2).run(killed)
    assert err.outcome == "error", (err.error, err.log_tail[-2000:])
    assert len(err.steps) == 2 and err.steps[0].error is None and len(err.steps[0].outputs[0].tokens) == 2
    assert err.steps[1].error is not None and err.steps[1].error.type == "HTTP400"
    assert "context length" in err.steps[1].error.message or "max" in err.steps[1].error.message
    assert err.error == err.steps[1].error

    assert crash.outcome == "crash", (crash.error, crash.log_tail[-2000:])
    assert [s.error is None for s in crash.steps] == [True, True, False]
    assert crash.steps[2].error.type == "ServerDead"
    assert crash.error.type == "SIGKILL" and "signal" in crash.error.message


@pytest.mark.engine
def test_refused_config_is_rejected():
    """vLLM refuses sleep mode on CPU at start-up: 'rejected', not a finding."""
    from hybridfuzz.engines.offline import device_kind

    if device_kind() != "cpu":
        pytest.skip("sleep mode is supported off CPU")
    trace = ServerHost(timeout=300).run(Case(model=ModelSpec(), steps=[Sleep()], engine=EngineConfig(enable_sleep_mode=True)))
    assert trace.outcome == "rejected", (trace.error, trace.log_tail[-2000:])
    assert trace.error.type == "ValidationError" and "Sleep mode" in trace.error.message
    assert trace.steps == []


@pytest.mark.engine
def test_startup_timeout_kills_the_server():
    t0 = time.perf_counter()
    host = ServerHost(timeout=4)
    trace = host.run(Case(model=ModelSpec(), steps=[ResetPrefixCache()]))
    assert trace.outcome == "timeout" and trace.error.type == "Timeout"
    assert time.perf_counter() - t0 < 60
    with pytest.raises(ProcessLookupError):  # the whole process group is gone
        os.killpg(host.last_pid, 0)


# ---------------------------------------------------------------- sleep/wake protocol on the server (issue #13)

def test_streamed_chunks_parse_best_first_and_keep_the_finish_reason():
    from hybridfuzz.engines.inflight import Streamed

    req = Streamed([1, 2, 3])
    req.take({"choices": [{"logprobs": {"tokens": ["token_id:5"], "top_logprobs": [{"token_id:4": -2.0, "token_id:5": -0.5}]}}]})
    assert req.first.is_set() and req.tokens == [5]
    req.take({"choices": [{"logprobs": {"tokens": ["token_id:9"], "top_logprobs": [{"token_id:9": -0.1}]}, "finish_reason": "abort"}]})
    req.take({"choices": [], "usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}})
    r = req.result()
    assert r.tokens == [5, 9] and r.logprobs == [[[5, -0.5], [4, -2.0]], [[9, -0.1]]]
    assert r.finish_reason == "abort" and r.num_cached_tokens == 0


@pytest.mark.engine
def test_sleep_with_requests_in_flight_queued_requests_and_reload_weights():
    """A request streaming when /sleep?mode=abort arrives ends (aborted or complete, never hangs); a request
    submitted while the scheduler is paused is queued and runs after the wake-up; partial wakes in both
    orders; reload_weights through /collective_rpc."""
    long = list(range(200, 230))
    steps = [Generate([PROMPT], max_tokens=4), Submit([long], max_tokens=64), Sleep(level=1, mode="abort"),
             Submit([SHORT], max_tokens=8), WakeUp(tags=["kv_cache"]), WakeUp(tags=["weights"]), ReloadWeights(),
             Generate([SHORT], max_tokens=8)]
    case = Case(model=ModelSpec(layers=("linear_attention", "full_attention")), steps=steps)
    with ServerHost(timeout=600) as host:
        trace = host.run(case)
    assert trace.outcome == "ok", (trace.error, trace.log_tail[-2000:])
    in_flight, queued = trace.steps[1].outputs[0], trace.steps[3].outputs[0]
    assert in_flight.finish_reason in ("abort", "length"), in_flight
    assert len(in_flight.tokens) >= 1 and (in_flight.finish_reason == "abort") == (len(in_flight.tokens) < 64), in_flight.tokens
    assert queued.finish_reason == "length" and len(queued.tokens) == 8, queued
    assert [s.kind for s in trace.steps] == ["generate", "submit", "sleep", "submit", "wake_up", "wake_up", "reload_weights", "generate"]
    print("in flight at the sleep:", in_flight.finish_reason, len(in_flight.tokens), "tokens; queued:", queued.tokens,
          "; generate after reload:", trace.steps[7].outputs[0].tokens)


def test_root_cause_locates_an_op_error_in_its_caller_not_in_torch_dispatch():
    log = "\n".join([
        "(Worker pid=3) ERROR 12-01 10:30:00 [multiproc_executor.py:1063] Traceback (most recent call last):",
        "(Worker pid=3) ERROR 12-01 10:30:00 [multiproc_executor.py:1063]   File \"/x/site-packages/vllm/model_executor/layers/mamba/ops/mamba_ssm.py\", line 400, in selective_scan_fn",
        "(Worker pid=3) ERROR 12-01 10:30:00 [multiproc_executor.py:1063]   File \"/x/site-packages/torch/_ops.py\", line 1269, in __call__",
        "(Worker pid=3) ERROR 12-01 10:30:00 [multiproc_executor.py:1063] RuntimeError: selective_scan_fwd: check failed",
    ])
    assert root_cause(log).where == "vllm/model_executor/layers/mamba/ops/mamba_ssm.py:400 in selective_scan_fn"
