"""Unpack wheels into a --target directory, all at once: what ``pip install --no-deps --target`` does for an offline
host, without its one-wheel-at-a-time loop. pip took 62 of the 96 s of installing vLLM 0.33.0's bundle on 2 cores
(2026-12-04); one process per core unpacks the same files (the importable tree compared equal to pip's, file by file;
pip also writes RECORD/INSTALLER, console scripts and the ``data`` scheme, which nothing here uses).

    python3 gpu/unpack_wheels.py TARGET WHEEL...

Executable bits are kept (triton's ptxas runs), and a wheel's ``*.data/purelib`` and ``*.data/platlib`` go to the
root, as pip puts them; its other ``.data`` schemes (scripts, headers, data) are dropped.
"""
from __future__ import annotations

import os
import shutil
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor


def unpack(wheel: str, target: str) -> None:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            for attempt in range(3):  # zipfile checks a directory exists, then makes it: another process may be first
                try:
                    path = z.extract(info, target)
                    break
                except FileExistsError:
                    if attempt == 2:
                        raise
            if (info.external_attr >> 16) & 0o111 and not info.is_dir():
                os.chmod(path, 0o755)


def lift_data(target: str) -> None:
    for name in os.listdir(target):
        if not name.endswith(".data"):
            continue
        for scheme in ("purelib", "platlib"):
            src = os.path.join(target, name, scheme)
            if os.path.isdir(src):
                shutil.copytree(src, target, dirs_exist_ok=True)
        shutil.rmtree(os.path.join(target, name))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: unpack_wheels.py TARGET WHEEL...", file=sys.stderr)
        return 2
    target, wheels = argv[0], sorted(argv[1:], key=os.path.getsize, reverse=True)  # the largest first: torch sets the pace
    os.makedirs(target, exist_ok=True)
    with ProcessPoolExecutor(max(1, len(os.sched_getaffinity(0)))) as pool:
        for future in [pool.submit(unpack, w, target) for w in wheels]:
            future.result()
    lift_data(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
