"""atheris harness for the component properties, through Hypothesis's fuzz_one_input.

    python fuzz/atheris_components.py [--property scale_view_fill|wake_kv_reinit|kv_layout] -atheris_runs=2000 corpusdir/

vLLM's KV-cache modules are instrumented (atheris.instrument_imports) so libFuzzer's
coverage steers Hypothesis's choices; a failing input is replayed through the same
@given test, so Hypothesis shrinks it and the shrunk case is written to --out
(default corpus/found/) like any check-components finding. The known 0.32.0 scale-view
failure is skipped by default (--keep-known to stop on it) so the run explores on.
"""
from __future__ import annotations

import argparse
import sys

import atheris

from hybridfuzz import _guard

_guard.install()  # torchvision guard before vLLM

with atheris.instrument_imports(include=["vllm.v1.core.kv_cache_utils", "vllm.v1.core.block_pool", "vllm.v1.kv_cache_interface",
                                         "vllm.v1.worker.utils", "vllm.v1.attention.backends.triton_attn",
                                         "vllm.model_executor.layers.mamba.abstract", "vllm.model_executor.layers.mamba.mamba_utils"]):
    from hybridfuzz.components import _build

    _build.vllm_modules()
    import vllm.v1.core.block_pool  # noqa: F401

from hypothesis import HealthCheck, settings  # noqa: E402

from hybridfuzz.components.search import PropertyFailed, property_test, search, write_found  # noqa: E402


def make_target(prop: str, keep_known: bool):
    def skip_known(v, body):
        if not keep_known and v.where == "TritonAttentionImpl._ensure_scale_caches":
            v.status = "pass"  # known 0.32.0 bug: explore past it

    test = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))(property_test(prop, skip_known))
    return test.hypothesis.fuzz_one_input


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--property", default="kv_layout")
    p.add_argument("--out", default="corpus/found")
    p.add_argument("--keep-known", action="store_true")
    args, rest = p.parse_known_args(argv[1:])
    fuzz_one = make_target(args.property, args.keep_known)

    def one(data: bytes) -> None:
        try:
            fuzz_one(data)
        except PropertyFailed:
            # Shrink through Hypothesis and store the case, then let libFuzzer record the crash input.
            res = search(args.property, examples=200)
            if res.verdict is not None:
                print("hybridfuzz: shrunk case written to", write_found(res, args.out), file=sys.stderr)
            raise

    atheris.Setup([argv[0], *rest], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
