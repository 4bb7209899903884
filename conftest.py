"""The two test tiers, decided in one place for tests/ and fuzz/.

The fast tier (README's test command, ``pytest -m "not slow"``) keeps every test that starts no engine and one
real-engine test for each behaviour, marked ``smoke``. Every other test that drives an engine (marked ``engine``, or
using an engine host fixture) is in the slow tier (``pytest -m slow``), with the tests marked ``slow`` by hand
(subprocess campaigns, benches, bisects over real releases, long Hypothesis profiles). A new engine test is slow until
someone picks it as a behaviour's smoke test, so the fast tier stays fast as the suite grows. ``.ci/run`` runs both.

``HYBRIDFUZZ_TEST_DEADLINE`` (seconds since the epoch), set by ``.ci/run`` for the slow tier, skips every test that
would start after it, with that reason in the report: CI's limit is a wall clock, and a run cut off by it reports
nothing at all.
"""
import os
import time

import pytest

ENGINE_FIXTURES = {"host", "replay_host", "engine_host"}


def is_slow(item) -> bool:
    if item.get_closest_marker("smoke"):
        return False
    drives_engine = item.get_closest_marker("engine") is not None or bool(ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())))
    return drives_engine or item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


DEADLINE = float(os.environ.get("HYBRIDFUZZ_TEST_DEADLINE") or 0)


def pytest_runtest_setup(item):
    if DEADLINE and time.time() > DEADLINE:
        pytest.skip("not run: .ci/run's deadline for the slow tier (HYBRIDFUZZ_TEST_DEADLINE) passed before this test")
