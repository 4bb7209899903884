"""atheris harness for the YAML case loader: every input loads or raises CaseError (one line).

    python fuzz/atheris_loader.py -atheris_runs=100000 corpusdir/

Any other exception escaping hybridfuzz.case.load_case, or a CaseError whose message
spans lines, is a crash libFuzzer reports (and saves as crash-<sha1>).
"""
from __future__ import annotations

import os
import sys

import atheris

import yaml  # noqa: E402,F401  (not instrumented: pure-Python yaml under coverage runs ~100 exec/s)

with atheris.instrument_imports(include=["hybridfuzz.case"]):
    from hybridfuzz import case as case_mod

CaseError = case_mod.CaseError


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    try:
        case_mod.load_case(text)
    except CaseError as e:
        msg = str(e)
        if "\n" in msg or not msg:
            raise AssertionError(f"CaseError message is not one line: {msg!r}") from None


def seed_corpus(directory: str) -> None:
    """Put the committed cases into an empty corpus directory so coverage starts from valid inputs."""
    os.makedirs(directory, exist_ok=True)
    if os.listdir(directory):
        return
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".yaml"):
                with open(os.path.join(dirpath, f), "rb") as src, open(os.path.join(directory, f), "wb") as dst:
                    dst.write(src.read())


def main(argv: list[str]) -> None:
    for a in argv[1:]:
        if not a.startswith("-"):
            seed_corpus(a)
    from hybridfuzz import vllm_facts

    vllm_facts.kv_cache_dtypes()  # warm the lru caches (imports vllm.config) outside the loop
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
