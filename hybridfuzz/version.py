"""hybridfuzz's version, read from the installed distribution's metadata (pyproject.toml is the one
place it is written); a source checkout that was never installed reads pyproject.toml itself."""
from __future__ import annotations

import functools
import os
import re


@functools.lru_cache(maxsize=1)
def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("hybridfuzz")
    except PackageNotFoundError:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyproject.toml")
        try:
            with open(path, encoding="utf-8") as f:
                m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
        except OSError:
            m = None
        return m.group(1) if m else "unknown"
