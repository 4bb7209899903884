"""s33: what the lease of 2026-12-05 22:57-23:18 UTC (one H100, vLLM 0.33.0) brought back (res/) into the corpus:
run.sh's shrinks, `replay --runs N --record` of the shrunk cases, and three int4_per_token_head calibrations, after
which the reference oracle judges int4 with its own tolerance (oracles/compare.py INT4). README.md here says what ran."""
import dataclasses
import os

from hybridfuzz.case import Observation, dump_case, load_case_file
from hybridfuzz.shrink import describe
from hybridfuzz.store import write_atomic

R33 = "results/gpu-h100-2026-12-05-s33/"
S, L, L2 = R33 + "res/shrink/", R33 + "res/late/", R33 + "res/late2/"
G = "corpus/gpu/{}-vllm-0.33.0.yaml"
N = "corpus/noise/{}-vllm-0.33.0.yaml"
INT4 = ("Under the int4 tolerance calibrated on 2026-12-05 (oracles/compare.py INT4: flips up to 7.3 nats, drift up to "
        "6.3, a top-k overlap of 30 %; {r}README.md) {what} is int4 quantization noise, not a finding.")


def rejudged(o: Observation, distance: str) -> Observation:
    """A replay of this lease whose only symptom was an int4 case's distance from its auto-KV reference, within INT4
    (``distance``: what its evidence measured), as the reference oracle judges it now: a pass of every check that ran
    before the reference one (health, self_consistency); the prefix-cache check runs after it, so its result in these
    runs is not known. The exported issue shows a case's latest divergence, which must be a finding."""
    if o.signature != "reference:beyond-noise:9c47a48c" or o.date != "2026-12-05" or "HBM3" not in o.device:
        return o
    return dataclasses.replace(
        o, verdict="pass", reproduced=0, signature="", signature_runs=None, oracle="reference",
        summary=f"re-judged under INT4 (s33): {o.runs} runs differed from the auto-KV reference only by {distance}, "
                f"int4 noise; the prefix-cache check, which runs after the reference one, is not known for them")


def filed(path: str, source: str, said: str, observed_from: tuple[str, ...] = (), distance: str = "",
          restored: tuple[Observation, ...] = ()) -> None:
    """``source`` written to ``path`` with ``said`` added to its note and the last observation of each of
    ``observed_from`` after its own, its int4 reference distances within INT4 re-judged (``distance``). ``restored``:
    observations that the source's last one replaced, put back before it."""
    c = load_case_file(source)
    own = [*c.observed[:-1], *restored, *c.observed[-1:]] if restored else c.observed
    seen = [*own, *(o for f in observed_from for o in load_case_file(f).observed[-1:])]
    write_atomic(path, dump_case(c.replace(note=c.note.rstrip() + " " + said,
                                           observed=[rejudged(o, distance) if distance else o for o in seen])))


# 427e4a18: 4 -> 1 layer (7 simplifications, up to 3 runs a variant, budget ended); replay --runs 3: 3 of 3
filed(G.format("zamba2-int4-per-token-head-graphs-wake-differs"), L + "427e4a18-min.yaml",
      f"On 2026-12-05 (H100, {R33}) the shrink, up to 3 fresh runs a batch of variants (its recorded 8 of 10), went "
      "from 4 layers to one Zamba2 hybrid layer and set 7 settings to their defaults (CUDA graphs stay on: "
      "enforce_eager's default) before its budget ended; its own confirmation passed, and `replay --runs 3 --record` "
      "of the result: 3 of 3 fresh runs diverged with this signature. Small, not proven minimal.")

# c5daf501: the 60-token copies down to 15 (7 simplifications, 6 runs a batch, budget ended); its confirmation showed
# the signature; replay --runs 3 showed only the int4 reference distance (noise under INT4)
# (the shrink's file, whose confirmation `replay --record` replaced before findings.with_observation kept other signatures)
filed(G.format("zamba2-int4-per-token-head-same-batch-differs"), S + "c5daf501.min.yaml",
      f"On 2026-12-05 (H100, {R33}) the shrink, up to 6 fresh runs a batch of variants (its recorded 3 of 5), cut "
      "the two copies of the 60-token prompt to 15 tokens and set block_size and model.seed to their defaults "
      "(7 simplifications, 137 engine runs) before its budget ended; its confirmation on a fresh engine diverged with "
      "this signature (step 1's two copies give different first tokens). `replay --runs 3 --record`: 3 of 3 runs "
      "differed only from the auto-KV reference (margin 5.31 nats). " + INT4.format(r=R33, what="that distance")
      + " This finding shows only sometimes: 1 of the last 4 fresh runs.", observed_from=(L + "c5daf501-min.yaml",),
      distance="a flip margin of 5.31 nats")

# e15d36c9: toward the device fault its first run showed (CUBLAS_STATUS_EXECUTION_FAILED, beside 20 other engines);
# 6 -> 3 steps on try 3 of 6, budget ended; replay --runs 3: only the int4 reference distance
filed(G.format("zamba2-int4-per-token-head-crash"), S + "e15d36c9.min.yaml",
      f"On 2026-12-05 (H100, {R33}) the shrinker's first fresh run faulted the device again (health:device-fault:"
      "daf61b86, 'CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasGemmEx' at step 2, beside about 20 "
      "other engines); shrinking toward that fault, up to 6 fresh runs a variant, dropped steps 3-5 (seen on the third "
      "run) before its budget ended: 1 layer, 3 steps, 19 prompt tokens. `replay --runs 3 --record` of it: 3 of 3 runs "
      "differed only from the auto-KV reference (top-k overlap 40 %). " + INT4.format(r=R33, what="that distance")
      + " The device fault shows rarely: the 6-step case in 1 of its last 5 fresh runs, the 3-step one in 1 of 6; "
      "not proven minimal.", observed_from=(L + "e15d36c9-min.yaml",),
      distance="a flip outside the "
      "top-19 with 40 % of it shared")

# 6e91af78: the shrink's 3 first runs passed (nothing to shrink); replay --runs 4: 2 of 4
filed(G.format("zamba2-int4-per-token-head-reload-differs-7"), L2 + "6e91af78.yaml",
      f"On 2026-12-05 (H100, {R33}) the shrink's first 3 fresh runs passed (nothing to shrink); `replay --runs 4 "
      "--record` then: 2 of 4 diverged with this signature. About one run in two, as before.")

# 11c48cea: no device fault in 9 fresh runs (the shrink's 3, replay --runs 2, replay --runs 4): only the int4 distance.
# The replay of late2/ ran on a copy of the corpus file and `--record` replaced s32's device faults (2 of 3 runs) with
# its own runs (findings.with_observation before s33): they are put back from s32's replay, counted as s32 counted them.
s32_faults = dataclasses.replace(load_case_file("results/gpu-h100-2026-12-05-s32/res/replay/11c48cea-min.yaml").observed[-1],
                                 signature_runs=2)
assert s32_faults.signature == "health:device-fault:daf61b86" and s32_faults.runs == 3
filed(G.format("zamba2-int4-per-token-head-one-prompt-device-fault"), L2 + "11c48cea.yaml",
      f"On 2026-12-05 (another H100, {R33}) 9 fresh runs (the shrink's first 3, then `replay --runs 2` and `--runs 4 "
      "--record`) gave no device fault: each differed only from the auto-KV reference (drift 5.38 nats at token 0). "
      + INT4.format(r=R33, what="that distance") + " The device fault showed in 2 of 3 runs on the H100 of s32 and "
      "in 0 of 9 on this one: it depends on the machine or on timing, and the triage stays real, high on s32's "
      "device-side assert.", observed_from=(L + "11c48cea.yaml",), distance="a drift of 5.38 nats",
      restored=(s32_faults,))

# 4dedba44 and 08bd9180: reference-only int4 findings within INT4 -> corpus/noise
REVISED = ("Triage revised on 2026-12-05 (s33) from 'real, high' to noise: its only symptom is the distance from the "
           "auto-KV reference, {what}. " + INT4.format(r=R33, what="that") + " What would overturn this: a run of it "
           "beyond INT4, or another oracle's symptom.")
filed(N.format("qwen3-next-int4-per-token-head-reference-flip-4dedba44"), L + "4dedba44-min.yaml",
      f"On 2026-12-05 (H100, {R33}) shrunk to the end (13 simplifications, 132 engine runs): 6 Qwen3-Next layers, "
      "one 63-token prompt, 3 tokens out, default settings; `replay --runs 3 --record`: 3 of 3 runs flipped the third "
      "token with margins 3.563/0.000 nats. "
      + REVISED.format(what="flip margins of 5.25 (as found) and 3.56 (shrunk)"))
os.remove(G.format("qwen3-next-int4-per-token-head-reference"))
filed(N.format("qwen35-int4-per-token-head-reference-flip-08bd9180"), G.format("qwen35-int4-per-token-head-reference"),
      REVISED.format(what="a flip margin of 3.84 nats"))
os.remove(G.format("qwen35-int4-per-token-head-reference"))

for path in [G.format(n) for n in ("zamba2-int4-per-token-head-graphs-wake-differs", "zamba2-int4-per-token-head-same-batch-differs",
                                   "zamba2-int4-per-token-head-crash", "zamba2-int4-per-token-head-reload-differs-7",
                                   "zamba2-int4-per-token-head-one-prompt-device-fault")] + \
        [N.format(n) for n in ("qwen3-next-int4-per-token-head-reference-flip-4dedba44", "qwen35-int4-per-token-head-reference-flip-08bd9180")]:
    c = load_case_file(path)
    print(os.path.basename(path), describe(c), [(o.date, o.device[-6:], o.signature, o.runs, o.reproduced, o.signature_runs) for o in c.observed][-2:])
