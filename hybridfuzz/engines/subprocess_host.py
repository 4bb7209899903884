"""The naive path: a new interpreter and a default ``vllm.LLM`` (multiprocess engine core) per case.

Slow (imports vLLM and spawns the engine core each time) but exactly what a user's
script does; ``hybridfuzz bench`` measures the fast path against it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, dump_case
from hybridfuzz.engines.base import BASE_ENV, ENGINE_DEFAULTS
from hybridfuzz.engines.isolation import SequentialHost, collect
from hybridfuzz.trace import Trace


class SubprocessHost(SequentialHost):
    name = "subprocess"
    protocol = sleepwake.OFFLINE

    def __init__(self, timeout: float = 300.0):
        self.timeout = timeout

    def run(self, case: Case, timeout: float | None = None) -> Trace:
        timeout = timeout or self.timeout
        with tempfile.TemporaryDirectory(prefix="hybridfuzz-") as d:
            case_path, out_path, log_path, progress_path = (os.path.join(d, n) for n in ("case.yaml", "trace.json", "engine.log", "progress.jsonl"))
            with open(case_path, "w") as f:
                f.write(dump_case(case))
            env = {**BASE_ENV, **ENGINE_DEFAULTS, **os.environ}
            env["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # collective_rpc with a function, to read engine settings
            t0 = time.perf_counter()
            with open(log_path, "wb") as log:
                proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.engines.child", case_path, out_path, progress_path],
                                        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
                timed_out = False
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)  # the engine core and any other children too
                    except ProcessLookupError:
                        pass
                    proc.wait()
            status = proc.returncode
            raw = (-status) if status < 0 else (status << 8)  # back to a waitpid status for collect()
            return collect(out_path, log_path, raw, timed_out, timeout, time.perf_counter() - t0, progress_path)[0]
