"""GPU host probe: what persistent mode and CUDA-graph settings cost on this GPU and vLLM.

    gpu/hf.sh PARTS SHA SITE -- python3 gpu/probe.py OUT.json [--sessions 12] [--cases 4]

Measures, on fresh fork-server engines: an eager case (the first one carries the JIT), a
CUDA-graph case with hybridfuzz's small capture sizes (engines/offline.py
GRAPH_CAPTURE_SIZES) and one with vLLM's default sizes, and N sessions of K cases each
at once (persistent mode): wall time, cases/min, engine starts/min. Writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--sessions", type=int, default=12)
    p.add_argument("--cases", type=int, default=4)
    p.add_argument("--skip-default-graphs", action="store_true")
    a = p.parse_args(argv)
    from hybridfuzz._guard import install

    install()
    from hybridfuzz.case import Case, EngineConfig, Generate, ResetPrefixCache
    from hybridfuzz.engines.forkserver import ForkServer
    from hybridfuzz.engines.offline import environment
    from hybridfuzz.model import ModelSpec

    model = ModelSpec(layers=("linear_attention", "full_attention", "linear_attention", "full_attention"))
    prompt = [3 + (i * 5) % 500 for i in range(40)]
    steps = [Generate(prompts=[prompt, prompt[:17]], max_tokens=8, logprobs=20), ResetPrefixCache(),
             Generate(prompts=[prompt], max_tokens=8, logprobs=20)]
    out: dict = {"env": environment(), "rows": []}

    def row(name: str, fn) -> None:
        t0 = time.time()
        try:
            extra = fn()
        except Exception as e:  # a probe that fails is a result too
            extra = {"error": f"{type(e).__name__}: {e}"}
        out["rows"].append({"probe": name, "wall_s": round(time.time() - t0, 2), **extra})
        print(json.dumps(out["rows"][-1]), flush=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=2)

    with ForkServer(workers=max(24, 2 * a.sessions), timeout=600, warm=False) as fs:
        def one(engine: EngineConfig) -> dict:
            t = fs.run(Case(model=model, engine=engine, steps=steps))
            return {"outcome": t.outcome, "startup_s": round(t.timings.get("startup_s", 0), 2),
                    "steps_s": round(t.timings.get("steps_s", 0), 2), "error": t.error.one_line() if t.error else "",
                    "settings": {k: t.engine_settings.get(k) for k in ("model_runner", "attention_backends", "enforce_eager")}}

        row("eager (first engine: JIT)", lambda: one(EngineConfig()))
        row("eager", lambda: one(EngineConfig()))
        row("graphs, small capture sizes", lambda: one(EngineConfig(enforce_eager=False)))
        row("graphs, small capture sizes, again", lambda: one(EngineConfig(enforce_eager=False)))
        if not a.skip_default_graphs:
            row("graphs, vLLM default sizes", lambda: one(EngineConfig(enforce_eager=False, extra={"compilation_config": {}})))

        def sessions(k: int) -> dict:
            kvs = ["auto", "fp8", "auto", "fp8_e5m2"]
            sess = [[Case(model=model, engine=EngineConfig(kv_cache_dtype=kvs[i % len(kvs)], seed=i), steps=steps)] * k
                    for i in range(a.sessions)]
            t0 = time.time()
            res = fs.run_sessions(sess)
            wall = time.time() - t0
            n = sum(len(r) for r in res)
            ok = sum(t.outcome == "ok" for r in res for t in r)
            starts = sum(1 for r in res for t in r if t.warm_cases == 0)
            return {"sessions": a.sessions, "cases_per_session": k, "cases": n, "ok": ok, "engine_starts": starts,
                    "cases_per_min": round(n / wall * 60, 1), "starts_per_min": round(starts / wall * 60, 1),
                    "errors": sorted({t.error.one_line() for r in res for t in r if t.error})[:5]}

        row("sessions of 1 case (fresh engine per case)", lambda: sessions(1))
        row(f"sessions of {a.cases} cases (persistent mode)", lambda: sessions(a.cases))
    print("probe done:", a.out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    sys.exit(main(sys.argv[1:]))
