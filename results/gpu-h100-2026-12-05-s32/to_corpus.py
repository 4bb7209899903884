"""s32: what the lease of 2026-12-05 19:00-19:28 UTC (one H100, vLLM 0.33.0) brought back (res/) into corpus/gpu:
four shrinks of results/gpu-h100-2026-12-05-s31/run-next.sh, three of them finished, and `replay --runs 3 --record`
of three shrunk cases (README.md here)."""
import dataclasses
import os

from hybridfuzz.case import Observation, dump_case, load_case_file
from hybridfuzz.shrink import describe
from hybridfuzz.store import write_atomic

R32 = "results/gpu-h100-2026-12-05-s32/"
S, P = R32 + "res/shrink/", R32 + "res/replay/"
G = "corpus/gpu/{}-vllm-0.33.0.yaml"


def counted(o: Observation) -> Observation:
    """The replays ran before observations counted the runs of their shown signature (signature_runs). It follows
    from what they recorded: no other symptom -> every run that diverged; 3 runs over 2 signatures -> the most
    frequent had 2."""
    if o.runs < 2 or not o.reproduced or o.signature_runs is not None:
        return o
    if not o.symptoms:
        return dataclasses.replace(o, signature_runs=o.reproduced)
    assert (o.reproduced, len(o.symptoms)) == (3, 1), o
    return dataclasses.replace(o, signature_runs=2)


def filed(path: str, source: str, said: str) -> None:
    """The shrunk (or replayed) ``source`` written to ``path`` with ``said`` added to its note."""
    c = load_case_file(source)
    write_atomic(path, dump_case(c.replace(note=c.note.rstrip() + " " + said, observed=[counted(o) for o in c.observed])))


# ef8dca8d: the shrink ran to the end (no variant of the last pass kept); replay --runs 3: 3 of 3
filed(G.format("falcon-h1-graphs-one-token-prompt-repeat-differs"), P + "ef8dca8d-min.yaml",
      f"On 2026-12-05 (H100, {R32}) the shrink ran to the end: block_size and model.seed went to their defaults and "
      "no further simplification kept the symptom (minimal: three 1-token generates on one Falcon-H1 layer, kv auto, "
      "CUDA graphs); `replay --runs 3 --record` of the minimal case: 3 of 3 fresh runs diverged with this signature.")

# c5daf501: the shrink ran to the end, down to one layer; replay --runs 3: 1 of 3 (it reproduces only sometimes)
filed(G.format("zamba2-int4-per-token-head-same-batch-differs"), P + "c5daf501-min.yaml",
      f"On 2026-12-05 (H100, {R32}) the shrink kept to the recorded signature and ran to the end (8 simplifications, "
      "84 engine runs): one Zamba2 hybrid layer, a 1-token generate, then one batch holding a 60-token prompt twice "
      "(with a 15-token prompt between them) whose two copies give different first tokens; the shrinker's "
      "confirmation on a fresh engine diverged with this signature. `replay --runs 3 --record`: 1 of 3 fresh runs "
      "diverged, 2 passed: it reproduces only sometimes, so a variant the shrink dropped may have failed by chance "
      "(minimal as far as one run per variant can tell).")

# 6e91af78: one simplification (step 2's max_tokens to 1) kept; the shrinker's confirmation showed only the reference
# symptom. It reproduces about half the time (s31: 3 of 6), so a variant judged once may have been dropped by chance.
filed(G.format("zamba2-int4-per-token-head-reload-differs-7"), S + "6e91af78.min.yaml",
      f"On 2026-12-05 (H100, {R32}) the shrink (2 variants at a time, one run each) kept one simplification "
      "(step 2's max_tokens to 1) and ran to the end; its confirmation on a fresh engine showed only a difference from "
      "the auto-KV reference (reference:beyond-noise:9c47a48c), not this signature. At a rate of about one in two, "
      "a variant judged by one run is dropped by chance half the time: small (1 layer, 3 steps, one 7-token prompt, "
      "1 token out), not proven minimal.")

# 11c48cea: shrunk by its GPU fault (one signature per device fault, s31) from 8 layers / 54 steps to 2 layers / 1 step;
# renamed (its warm history is gone). replay --runs 3: 2 device faults, 1 difference from the auto reference.
old = G.format("zamba2-int4-per-token-head-warm-history-crash")
new = G.format("zamba2-int4-per-token-head-one-prompt-device-fault")
filed(new, P + "11c48cea-min.yaml",
      f"On 2026-12-05 (H100, {R32}) shrunk ALONE on the GPU, one variant at a time, toward its device fault "
      "(`--signature health:device-fault:daf61b86`): 28 simplifications in 646 s, from 8 layers and 54 steps to 2 "
      "Zamba2 layers (hybrid, mamba) and one generate of one 135-token prompt with max_num_batched_tokens 128 (so its "
      "prefill runs in two chunks), 2 tokens out; the budget ended (not proven minimal). The shrinker's confirmation "
      "on a fresh engine: 'Triton Error [CUDA]: device-side assert triggered'. `replay --runs 3 --record`: 2 of 3 "
      "fresh runs faulted the device the same way, the third only differed from the auto-KV reference "
      "(reference:beyond-noise:9c47a48c). The GPU stayed usable (no Xid needing a reset, res/sampler.txt). Renamed "
      "from zamba2-int4-per-token-head-warm-history-crash (its warm history is gone). Triage: real, high: a kernel of "
      "the int4 per-token-head KV path asserts on the device (class 1 of results/gpu-h200-2026-12-03-s21/README.md).")
os.remove(old)

for name in ("falcon-h1-graphs-one-token-prompt-repeat-differs", "zamba2-int4-per-token-head-same-batch-differs",
             "zamba2-int4-per-token-head-reload-differs-7", "zamba2-int4-per-token-head-one-prompt-device-fault"):
    c = load_case_file(G.format(name))
    print(name, describe(c), [(o.date, o.device[-13:], o.signature, o.runs, o.reproduced, o.signature_runs) for o in c.observed][-1:])
