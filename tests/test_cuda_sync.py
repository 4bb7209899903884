"""The engines' GPU wait schedule (hybridfuzz/engines/cuda_sync.py), on a machine without a GPU.

The driver calls are exercised against a stand-in ``libcuda.so.1`` compiled here (two devices; it writes each
``cuDevicePrimaryCtxSetFlags_v2`` call to a file), so the ctypes signatures, the device loop and the flag values
are checked where CI runs; what the real driver does with the flag was measured on an H200 (2026-12-02: no gain)."""
import os
import subprocess
import sys
import textwrap

import pytest

from hybridfuzz.engines import cuda_sync

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAKE_DRIVER = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdlib.h>
    static int inited = 0;
    int cuInit(unsigned int flags) { inited = 1; return 0; }
    int cuDeviceGetCount(int *n) { if (!inited) return 3; *n = 2; return 0; }
    int cuDeviceGet(int *dev, int ordinal) { *dev = 100 + ordinal; return 0; }
    int cuDevicePrimaryCtxSetFlags_v2(int dev, unsigned int flags) {
        FILE *f = fopen(getenv("FAKE_CUDA_LOG"), "a");
        fprintf(f, "%d %u\n", dev, flags);
        fclose(f);
        return 0;
    }
""")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    d = tmp_path_factory.mktemp("driver")
    (d / "fake.c").write_text(FAKE_DRIVER)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "fake.c")], check=True)
    return str(d)


def _apply_in_child(driver_dir: str, log: str, schedule: str | None) -> str:
    env = {**os.environ, "LD_LIBRARY_PATH": driver_dir, "FAKE_CUDA_LOG": log}
    env.pop(cuda_sync.ENV, None)
    if schedule is not None:
        env[cuda_sync.ENV] = schedule
    code = "from hybridfuzz.engines import cuda_sync as c; print(c.apply()); print(c.apply())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("schedule, flag", [(None, 4), ("block", 4), ("yield", 2), ("spin", 1), ("auto", 0)])
def test_every_gpu_gets_the_schedule_once(fake_driver, tmp_path, schedule, flag):
    log = str(tmp_path / "calls")
    out = _apply_in_child(fake_driver, log, schedule)
    assert out.split() == [schedule or "block"] * 2  # the second call answers from the first
    assert open(log).read().split("\n")[:-1] == [f"100 {flag}", f"101 {flag}"]  # each device, once


def test_no_driver_no_schedule(tmp_path):
    env = {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}  # an empty directory: no libcuda.so.1 there...
    code = ("import ctypes\ntry:\n    ctypes.CDLL('libcuda.so.1'); print('driver')\nexcept OSError:\n"
            "    from hybridfuzz.engines import cuda_sync as c; print(c.apply())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    if out.strip() == "driver":
        pytest.skip("this machine has an NVIDIA driver")  # ...unless the system has one
    assert out.strip() == "None"


@pytest.mark.parametrize("value, expected", [("", "block"), ("Block", "block"), (" spin ", "spin"), ("auto", "auto")])
def test_chosen_reads_the_variable(value, expected):
    assert cuda_sync.chosen({cuda_sync.ENV: value}) == expected


def test_an_unknown_schedule_is_one_line_naming_the_variable():
    env = {**os.environ, cuda_sync.ENV: "fast"}
    p = subprocess.run([sys.executable, "-m", "hybridfuzz.cli", "platform"], env=env, capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "hybridfuzz: HYBRIDFUZZ_CUDA_SYNC: unknown schedule 'fast' (one of: block, yield, spin, auto)"]


@pytest.mark.engine
@pytest.mark.parametrize("kind", ["forkserver", "subprocess"])
def test_engines_of_every_offline_host_run_with_the_engine_defaults(host, kind, monkeypatch):
    """Each engine process runs with every ENGINE_DEFAULTS variable (engines/base.py) and its Trace says so: Triton's
    autotune cache on (on a GPU a fresh engine per session would otherwise benchmark every config of every FLA and
    Mamba kernel again) and humming's background builds off (two torch-importing processes per engine otherwise).
    The caller's environment overrides a default, so that the two can be measured against each other."""
    from hybridfuzz.case import Case, Generate
    from hybridfuzz.engines.base import ENGINE_DEFAULTS
    from hybridfuzz.hosts import make_host
    from hybridfuzz.model import FULL, LINEAR, ModelSpec

    case = Case(ModelSpec(layers=(LINEAR, FULL)), [Generate([[5, 6, 7]], max_tokens=2)])
    assert ENGINE_DEFAULTS["HUMMING_DISABLE_PARALLEL_BUILD"] == "1"
    for name in ENGINE_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    trace = host.run(case) if kind == "forkserver" else make_host(kind, timeout=300).run(case)
    assert trace.outcome == "ok", trace.error
    assert {k: trace.engine_settings.get(k) for k in ENGINE_DEFAULTS} == ENGINE_DEFAULTS, trace.engine_settings
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "0")
    with make_host(kind, workers=1, timeout=300, warm=False) as h:  # a new host: a fork server reads it at launch
        trace = h.run(case)
    assert trace.engine_settings["TRITON_CACHE_AUTOTUNING"] == "0", trace.engine_settings
