"""s35: what the lease of 2026-12-06 06:12-06:39 UTC (one H100, vLLM 0.33.0) brought back (res/) into the corpus.
README.md here says what ran. Runs are merged into corpus files by findings.with_observation, the rule
`replay --record` uses; where that rule would replace an earlier record of the same key, the two are summed into one.
Run from the checkout's root: python results/gpu-h100-2026-12-06-s35/to_corpus.py"""
import dataclasses
import os

from hybridfuzz.case import Observation, dump_case, load_case_file
from hybridfuzz.findings import with_observation
from hybridfuzz.shrink import describe
from hybridfuzz.store import write_atomic

R35 = "results/gpu-h100-2026-12-06-s35/"
RES = R35 + "res/"
G = "corpus/gpu/{}-vllm-0.33.0.yaml"
NAN = "zamba2-int4-per-token-head-first-token-nonfinite"


def last(path: str) -> Observation:
    return load_case_file(RES + path).observed[-1]


def filed(name: str, said: str, *observations: Observation, body: str | None = None) -> None:
    """corpus/gpu/NAME with ``said`` added to its note and ``observations`` merged in, in order; with ``body`` (a case
    file under res/), its model, engine, steps and oracle replaced by that file's: a shrink's result."""
    path = G.format(name)
    c = load_case_file(path)
    if body:
        b = load_case_file(RES + body)
        c = c.replace(model=b.model, engine=b.engine, steps=b.steps, oracle=b.oracle)
    for o in observations:
        c = with_observation(c, o)
    write_atomic(path, dump_case(c.replace(note=c.note.rstrip() + " " + said)))


# 427e4a18: shrink 1 (600 s, 6 variants, 6 tries a batch) kept 14 simplifications, to 146 prompt tokens, and its
# confirmation passed; shrink 2 from that (290 s) kept 6 more, to a 7-token prompt before and after one sleep/wake,
# and its confirmation showed NaN logprobs at the first token; replay --runs 6 --record of it: 6 of 6 diverged
shrunk, nan6 = last("shrink2/427e4a18.min.yaml"), last("late3/427e4a18.yaml")
assert shrunk.signature == "self_consistency:wake-differs:427e4a18"
assert nan6.signature == "health:nonfinite:e5167d1e" and (nan6.runs, nan6.reproduced, nan6.signature_runs) == (6, 6, 4)
assert nan6.symptoms == ["self_consistency:wake-differs:427e4a18"]
filed("zamba2-int4-per-token-head-graphs-wake-differs",
      f"On 2026-12-06 (H100, {R35}) two shrinks, 6 fresh runs a batch of variants: the first (600 s) kept 14 "
      "simplifications (246 to 146 prompt tokens, its extra settings and TRITON_ATTN to their defaults; its "
      "confirmation passed), the second (290 s, from that result) 6 more: a 7-token prompt, one token, before and "
      "after one sleep/wake, in eager mode. `replay --runs 6 --record` of that: 6 of 6 fresh runs diverged, 2 with "
      "this signature and 4 with NaN logprobs at the first token of the first generate, before any sleep: the "
      f"sleep/wake is not needed. Shrunk on toward that NaN, it is corpus/gpu/{NAN}-vllm-0.33.0.yaml (1 step, 7 "
      "tokens, minimal). This file keeps the sleep/wake form.",
      shrunk, nan6, body="late3/427e4a18.yaml")

# e5167d1e, new: shrink 3 (140 s, toward the NaN) dropped the first generate's sleep/wake steps and the generate
# before them; `minimal`, and its confirmation showed the NaN; replay --runs 6 --record: 6 of 6, 4 NaN, 2 reference
nan_min = load_case_file(RES + "late5/e5167d1e.yaml")
rep = nan_min.observed[-1]
assert rep.signature == "health:nonfinite:e5167d1e" and (rep.runs, rep.reproduced, rep.signature_runs) == (6, 6, 4)
assert rep.symptoms == ["reference:beyond-noise:9c47a48c"] and len(nan_min.steps) == 1
write_atomic(G.format(NAN), dump_case(nan_min.replace(observed=[rep], note=(
    f"Shrunk on 2026-12-06 (H100, {R35}) from corpus/gpu/zamba2-int4-per-token-head-graphs-wake-differs-vllm-0.33.0.yaml "
    "(signature 427e4a18, found unaided by the 20-minute default campaign on vLLM 0.33.0, H200, "
    "results/gpu-h200-2026-12-04-s24/), whose shrunk form showed this NaN on a fresh engine: `hybridfuzz shrink "
    "--signature health:nonfinite:e5167d1e`, 6 fresh runs a batch of variants, printed `minimal: 1 layer(s), 1 "
    "step(s), 7 prompt tokens after 2 simplifications, 30 engine runs, 60s`, and its confirmation on a fresh engine "
    "showed the NaN. `replay --runs 6 --record`: 6 of 6 fresh runs diverged, 4 with every logprob NaN at the first "
    "token and 2 with a first token beyond int4 noise from the auto-KV reference (signature 9c47a48c, the symptom "
    "e15d36c9's replays show at its third generate). Triage: real, high, the per-token-head quantized KV class "
    "(results/gpu-h200-2026-12-03-s21/README.md, class 1) at its smallest: one Zamba2 hybrid layer, "
    "int4_per_token_head, eager, one 7-token prompt, one token, on a fresh engine. It needs no sleep/wake and no "
    "second request. Prefix caching is at vLLM's default, which is on here (Mamba cache mode align, block size 128 "
    "in the run's engine settings); whether it needs it was not tried. The same case with kv_cache_dtype auto is "
    "the reference, and its logprobs are finite. "
    "That it varies between fresh engines points at memory read before it is written; not proven (README.md)."))))

# c5daf501: `minimal: ... after 0 simplifications, 110 engine runs`: no single simplification showed the signature in
# 6 fresh runs. Its first run diverged with the signature and its confirmation passed: with s34's record of the same
# key (3 runs, 1 with it), 5 runs and 2
first, before = last("shrink/c5daf501.min.yaml"), load_case_file(G.format("zamba2-int4-per-token-head-same-batch-differs")).observed[-1]
assert first.signature == before.signature == "self_consistency:repeat-differs:c5daf501" and first.runs == 1
assert (before.runs, before.reproduced, before.signature_runs) == (3, 1, 1)
filed("zamba2-int4-per-token-head-same-batch-differs",
      f"On 2026-12-06 (H100, {R35}) `hybridfuzz shrink` printed `minimal: 1 layer(s), 2 step(s), 46 prompt tokens "
      "after 0 simplifications, 110 engine runs, 194s`: none of its one-step simplifications showed the signature in 6 "
      "fresh runs each. Its first run showed the signature and its confirmation passed; with s34's 3 runs, 2 of 5.",
      dataclasses.replace(first, runs=5, reproduced=2, signature_runs=2))

# e15d36c9: the shrink toward its device fault gave up (6 fresh runs: two reference distances, four passes); then
# replay --runs 6 --record: 5 of 6 diverged from the auto-KV reference at step 2, no device fault
ref5 = last("replay2/e15d36c9.yaml")
assert ref5.signature == "reference:beyond-noise:9c47a48c" and (ref5.runs, ref5.reproduced) == (6, 5)
filed("zamba2-int4-per-token-head-crash",
      f"On 2026-12-06 (H100, {R35}) a shrink toward the device fault gave up after 6 fresh runs without one (two "
      "differed from the auto-KV reference at the third generate, four passed), beside two other shrinks and a calibration; a minute later "
      "`replay --runs 6 --record`, beside one shrink: 5 of 6 differed from the reference at the third generate's "
      f"first token (signature 9c47a48c, as in corpus/gpu/{NAN}-vllm-0.33.0.yaml), none faulted. Not proven minimal; "
      "that case is the class's minimal reproduction.",
      ref5)

# 11c48cea: the shrink's 6 first fresh runs all passed; with s34's record of the same key (9 runs), 15
quiet = load_case_file(G.format("zamba2-int4-per-token-head-one-prompt-device-fault")).observed[-1]
assert (quiet.verdict, quiet.runs, quiet.reproduced) == ("pass", 9, 0)
filed("zamba2-int4-per-token-head-one-prompt-device-fault",
      f"On 2026-12-06 (H100, {R35}) a shrink alone on the GPU gave up after 6 fresh runs, all passing: 0 of 24 on H100s "
      f"since s32's 2 of 3. Triage unchanged; corpus/gpu/{NAN}-vllm-0.33.0.yaml is the class's minimal reproduction.",
      dataclasses.replace(quiet, runs=15))

for name in ("zamba2-int4-per-token-head-graphs-wake-differs", NAN, "zamba2-int4-per-token-head-same-batch-differs",
             "zamba2-int4-per-token-head-crash", "zamba2-int4-per-token-head-one-prompt-device-fault"):
    c = load_case_file(G.format(name))
    print(os.path.basename(G.format(name)), describe(c),
          [(o.date, o.device[-6:], o.verdict, o.signature, o.runs, o.reproduced, o.signature_runs) for o in c.observed[-3:]])
