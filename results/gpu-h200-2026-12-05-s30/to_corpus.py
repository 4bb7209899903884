"""s30: what the lease of 2026-12-05 brought back (res/shrink/) into corpus/gpu: three finished shrinks, two partial
ones (interrupted as the device time ended), and two minimal cases whose first fresh run here passed."""
import dataclasses

from hybridfuzz.case import Observation, dump_case, load_case_file
from hybridfuzz.store import write_atomic

S = "results/gpu-h200-2026-12-05-s30/res/shrink/"
R30 = "results/gpu-h200-2026-12-05-s30/"
G = "corpus/gpu/{}-vllm-0.33.0.yaml"


def shrunk(sig: str, name: str, said: str) -> None:
    """The shrinker's output replaces the corpus case; its note keeps the old triage and says what this lease did."""
    old = load_case_file(G.format(name))
    new = load_case_file(S + sig + ".min.yaml")
    note = old.note.rstrip()
    note = note[: note.index(" shrunk by `hybridfuzz shrink`")] if " shrunk by `hybridfuzz shrink`" in note else note
    write_atomic(G.format(name), dump_case(new.replace(note=f"{note} {said}")))


def passed_here(name: str, said: str) -> None:
    """A pass on a fresh engine, recorded beside the divergence that was seen before: it reproduces only sometimes."""
    c = load_case_file(G.format(name))
    obs = Observation(vllm="0.33.0", verdict="pass", device="NVIDIA H200", torch="2.14.0+cu130", date="2026-12-05",
                      oracle="health, self_consistency, reference, prefix_cache",
                      summary="no divergence (health, self_consistency, reference, prefix_cache)", runs=1, reproduced=0)
    write_atomic(G.format(name), dump_case(c.replace(note=c.note.rstrip() + " " + said, observed=[*c.observed, obs])))


shrunk("4e783eaf", "falcon-h1-fp8-graphs-one-token-prompt-reference",
       f"On 2026-12-05 (H200, {R30}) `hybridfuzz shrink` ran it again: no variant keeps the signature (17 engine runs, "
       "85 s, finished), so this case is proven minimal; replayed on a fresh engine: same signature.")
shrunk("e0d58277", "lfm2-conv-only-graphs-one-token-prompt-after-wake",
       f"Shrunk on 2026-12-05 (H200, {R30}) from 7 steps and 49 prompt tokens to 4 steps (11 simplifications, 60 "
       "engine runs, 276 s, finished: proven minimal); the KV dtype went back to auto (the model has no attention layer). "
       "Replayed on a fresh engine: same signature.")
shrunk("bfecd3c0", "granite-int8-per-token-head-graphs-nonfinite",
       f"Shrunk on 2026-12-05 (H200, {R30}) to 2 layers (attention, mamba) and two 1-token generates (16 "
       "simplifications, 61 engine runs, 409 s, finished: proven minimal). Replayed on a fresh engine: same signature.")
shrunk("c5daf501", "zamba2-int4-per-token-head-same-batch-differs",
       f"Shrunk in part on 2026-12-05 (H200, {R30}): from 4 layers, 6 steps and 462 prompt tokens to 2 Zamba2 hybrid "
       "layers, 2 steps and 155 prompt tokens (18 simplifications in 413 s) before the device time ended (interrupted; "
       "not proven minimal). Each kept variant diverged on a fresh engine with the target signature.")
shrunk("ef8dca8d", "falcon-h1-fp8-warm-history-one-token-prompt",
       f"Shrunk in part on 2026-12-05 (H200, {R30}): from 290 steps and 3 layers to 3 steps and one Falcon-H1 layer, 56 "
       "prompt tokens (a 54-token generate, then the 1-token prompt [327] twice; its second token differs), before the "
       "device time ended (interrupted at 448 s; not proven minimal). Each kept variant diverged on a fresh engine.")
passed_here("zamba2-int4-per-token-head-reload-differs-7",
            f"On 2026-12-05 (H200, {R30}) the shrinker's first replay of this minimal case on a fresh engine passed: it "
            "reproduces only sometimes (1 divergence when it was kept on 2026-12-04, 1 pass here).")
passed_here("zamba2-int4-per-token-head-graphs-wake-differs",
            f"On 2026-12-05 (H200, {R30}) the shrinker's first replay of this case on a fresh engine passed: it reproduces "
            "only sometimes (a divergence on 2026-12-04, a pass here).")
for name in ("falcon-h1-fp8-graphs-one-token-prompt-reference", "lfm2-conv-only-graphs-one-token-prompt-after-wake",
             "granite-int8-per-token-head-graphs-nonfinite", "zamba2-int4-per-token-head-same-batch-differs",
             "falcon-h1-fp8-warm-history-one-token-prompt", "zamba2-int4-per-token-head-reload-differs-7",
             "zamba2-int4-per-token-head-graphs-wake-differs"):
    c = load_case_file(G.format(name))
    print(name, len(c.model.layers), "layers", len(c.steps), "steps", [(o.date, o.verdict, o.signature) for o in c.observed][-2:])
