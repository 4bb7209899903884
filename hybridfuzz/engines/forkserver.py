"""The fast path: a fork server, as AFL uses for native targets.

One long-lived process imports torch and vLLM once and (on CPU) runs a warm-up
engine, so lazy initialisation (kernel JIT, dynamo, imports inside vLLM) is done
before the fork; then ``gc.freeze()``. Every case runs in a freshly forked child
that builds a fresh ``vllm.LLM`` (engine core in-process), so each case still
starts from fresh engine state. A child that crashes, hangs or is OOM-killed
becomes a Trace outcome; the server and the caller live on.

Fork safety: GNU OpenMP cannot survive fork once its thread pool exists, so the
server and its children run with OMP_NUM_THREADS=1 (parallelism comes from
running several children at once instead). On CUDA the server never touches the
GPU before forking: each child initialises CUDA itself.

Protocol: a socketpair carrying ``multiprocessing.connection`` messages:
``("run", id, case_yaml, timeout)`` -> ``(id, trace_dict)``; ``("stop",)``.
"""
from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection

from hybridfuzz.case import Case, dump_case
from hybridfuzz.trace import ErrorInfo, Trace

SERVER_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in the child itself: no second spawn per case
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class ForkServer:
    """Client side. ``run(case)`` and ``run_many(cases)`` return Traces."""

    name = "forkserver"

    def __init__(self, workers: int = 1, timeout: float = 300.0, warm: bool = True):
        self.workers = max(1, workers)
        self.timeout = timeout
        self._proc = None
        self._conn: Connection | None = None
        self._next_id = 0
        self._warm = warm
        self.start_seconds = 0.0

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        parent, child = socket.socketpair()
        env = dict(os.environ, **SERVER_ENV)
        env["HYBRIDFUZZ_FORKSERVER_FD"] = str(child.fileno())
        env["HYBRIDFUZZ_FORKSERVER_WARM"] = "1" if self._warm else "0"
        env["HYBRIDFUZZ_WORKERS"] = str(self.workers)
        self._log = tempfile.NamedTemporaryFile(prefix="hybridfuzz-forkserver-", suffix=".log", delete=False)
        t0 = time.perf_counter()
        self._proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.engines.forkserver"], pass_fds=[child.fileno()],
                                      env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        child.close()
        self._conn = Connection(parent.detach())
        if not self._conn.poll(600):
            raise RuntimeError(f"fork server did not start; see {self._log.name}")
        try:
            hello = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"fork server died while starting; see {self._log.name}") from None
        self.start_seconds = time.perf_counter() - t0
        self.server_info = hello

    def run_many(self, cases: list[Case], timeout: float | None = None) -> list[Trace]:
        self.start()
        assert self._conn is not None
        ids = []
        for case in cases:
            self._next_id += 1
            ids.append(self._next_id)
            self._conn.send(("run", self._next_id, dump_case(case), float(timeout or self.timeout)))
        results: dict[int, Trace] = {}
        while len(results) < len(ids):
            try:
                rid, data = self._conn.recv()
            except (EOFError, OSError):
                self._proc = None
                err = ErrorInfo("ForkServerDied", "the fork server itself died; it is restarted for the next case")
                for i in ids:
                    results.setdefault(i, Trace(outcome="crash", error=err))
                break
            results[rid] = Trace.from_dict(data)
        return [results[i] for i in ids]

    def run(self, case: Case, timeout: float | None = None) -> Trace:
        return self.run_many([case], timeout)[0]

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(("stop",))
            except OSError:
                pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._proc = None
        self._conn = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- server side

def _warm_up() -> None:
    """Run one tiny case so lazy initialisation happens here, not in every child."""
    from hybridfuzz.case import Generate
    from hybridfuzz.engines.offline import device_kind, run_case
    from hybridfuzz.model import ModelSpec

    if device_kind() != "cpu":
        return  # never initialise CUDA before fork
    for layers in (("linear_attention", "full_attention"),):
        run_case(Case(model=ModelSpec(layers=layers), steps=[Generate(prompts=[list(range(3, 40))], max_tokens=2)]))


def _child(case_yaml: str, result_path: str, log_path: str, workers: int) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.setsid()
    try:
        import json

        from hybridfuzz.case import load_case
        from hybridfuzz.engines.offline import run_case

        trace = run_case(load_case(case_yaml))
        with open(result_path + ".tmp", "w") as f:
            json.dump(trace.to_dict(), f)
        os.replace(result_path + ".tmp", result_path)
    finally:
        os._exit(0)


def serve() -> None:
    import hybridfuzz  # noqa: F401

    conn = Connection(int(os.environ["HYBRIDFUZZ_FORKSERVER_FD"]))
    t0 = time.perf_counter()
    import vllm  # noqa: F401
    from vllm import LLM, SamplingParams  # noqa: F401

    import hybridfuzz.engines.offline  # noqa: F401
    from hybridfuzz.engines.isolation import collect

    if os.environ.get("HYBRIDFUZZ_FORKSERVER_WARM") == "1":
        _warm_up()
    gc.collect()
    gc.freeze()  # children's gc passes then skip everything imported here
    conn.send({"pid": os.getpid(), "ready_s": time.perf_counter() - t0})
    workdir = tempfile.mkdtemp(prefix="hybridfuzz-fs-")
    queue: list[tuple[int, str, float]] = []
    running: dict[int, tuple[int, float, float, str, str]] = {}  # pid -> (id, start, timeout, result, log)
    max_children = int(os.environ.get("HYBRIDFUZZ_WORKERS", "1"))
    stopping = False
    while not (stopping and not queue and not running):
        while conn.poll(0.02 if running or queue else 0.5):
            try:
                msg = conn.recv()
            except EOFError:
                stopping = True
                queue.clear()
                break
            if msg[0] == "stop":
                stopping = True
            else:
                queue.append(msg[1:])
        while queue and len(running) < max_children:
            rid, case_yaml, timeout = queue.pop(0)
            result = os.path.join(workdir, f"{rid}.json")
            log = os.path.join(workdir, f"{rid}.log")
            pid = os.fork()
            if pid == 0:
                _child(case_yaml, result, log, max_children)
            running[pid] = (rid, time.perf_counter(), timeout, result, log)
        for pid, (rid, start, timeout, result, log) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            timed_out = not done and time.perf_counter() - start > timeout
            if timed_out:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
            if done or timed_out:
                trace = collect(result, log, status, timed_out, timeout, time.perf_counter() - start)
                for p in (result, log):
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
                del running[pid]
                try:
                    conn.send((rid, trace.to_dict()))
                except OSError:
                    stopping = True
    os._exit(0)


if __name__ == "__main__":
    serve()
