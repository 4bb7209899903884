"""Naive-path child: ``python -m hybridfuzz.engines.child CASE.yaml OUT.json PROGRESS.jsonl``.

A fresh interpreter imports vLLM and runs one case with vLLM's defaults (the
multiprocess engine core included), as a user's script would, streaming its
progress so that a hang or crash still names the step it happened in.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from hybridfuzz._guard import install as install_guard

    install_guard()  # before vLLM imports torchvision
    from hybridfuzz.case import load_case_file
    from hybridfuzz.engines.isolation import ProgressWriter, write_result
    from hybridfuzz.engines.offline import run_case

    progress = ProgressWriter(argv[2]) if len(argv) > 2 else None
    trace = run_case(load_case_file(argv[0]), progress)
    write_result(argv[1], [trace])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
