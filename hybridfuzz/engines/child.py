"""Naive-path child: ``python -m hybridfuzz.engines.child CASE.yaml OUT.json``.

A fresh interpreter imports vLLM and runs one case with vLLM's defaults (the
multiprocess engine core included), as a user's script would.
"""
from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    import hybridfuzz  # noqa: F401  (torchvision guard first)
    from hybridfuzz.case import load_case_file
    from hybridfuzz.engines.offline import run_case

    trace = run_case(load_case_file(argv[0]))
    tmp = argv[1] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(trace.to_dict(), f)
    import os

    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
