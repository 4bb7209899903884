"""Run from the repository root: python3 THIS OUT.json.gz. The same cases under each turboquant KV dtype, each paired with its auto reference; saved as calibrate pairs."""
import dataclasses
import sys
from hybridfuzz.calibrate import noisy_pairs, save_pairs
from hybridfuzz.case import load_case_file
from hybridfuzz.hosts import make_host

DT = ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
finding = load_case_file("corpus/found/turboquant-formats-ignored-cpu.yaml")
finding = finding.replace(observed=[], note="")
base = [c for c in noisy_pairs(12, ("auto",), seed=7) if "full_attention" in c.model.layers][:3] + [finding]
cases = [c.replace(engine=dataclasses.replace(c.engine, kv_cache_dtype=d)) for c in base for d in DT]
refs = [c.reference_case() for c in base]
with make_host("forkserver", workers=2, timeout=600) as host:
    traces = host.run_many(cases + refs)
records = [(cases[i * len(DT) + j], traces[i * len(DT) + j], traces[len(cases) + i]) for i in range(len(base)) for j in range(len(DT))]
save_pairs(sys.argv[1], records)
for c, t, r in records:
    print(c.engine.kv_cache_dtype, t.outcome, [[o.tokens for o in outs] for _, outs in t.generate_results()])
