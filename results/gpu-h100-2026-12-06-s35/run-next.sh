#!/usr/bin/env bash
# The plan for the next lease (one GPU, 16 cores, vLLM 0.33.0), written 2026-12-06 in the thirty-fifth session after
# results/gpu-h100-2026-12-06-s35/README.md: the int4 class is one 7-token prompt that gives NaN at the first token
# (6 of 6 fresh runs) and samples token 512 of 512. What to learn next, all in phase 1 (PHASE1 s, together):
#   decisive replays of the minimal case, 6 fresh runs each (next/*.yaml): as found (its rate on a fresh host);
#     VLLM_USE_V2_MODEL_RUNNER=0 (the older runner and sampler: is the NaN, or the id 512, the V2 runner's?);
#     enable_prefix_caching false; and as found under HYBRIDFUZZ_MEND=scale-fill (the _ensure_scale_caches fills);
#   the shrink order of s35 measured on the GPU: 427e4a18 as filed before s35 (1 layer, 4 steps, 246 tokens), toward
#     its signature, 6 variants at a time: s35 took 470 + 266 s to 14 tokens with settings last;
#   `calibrate --kv-dtypes nvfp4` (24 pairs): nvfp4 has no GPU measurement (FLASHINFER declares it; an H100 may refuse).
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, with LEASE_LEFT and
# PHASE1 (gpu/README.md). gpu/lease.sh's sampler stops every job if the GPU needs a reset.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_begin 38
next=$here/results/gpu-h100-2026-12-06-s35/next
mkdir -p "$res/decisive" "$res/calib"
decisive() {  # decisive NAME CASE [ENV=VALUE...]: 6 fresh runs of a copy of next/CASE.yaml, recorded into the copy
  local name=$1 case=$2; shift 2
  cp "$next/$case.yaml" "$res/decisive/$name.yaml"
  say "decisive-$name start $*"
  (env "$@" bash "$here/gpu/hf.sh" /tmp/p33 /tmp/sha33 /tmp/site33 -- replay "$res/decisive/$name.yaml" --runs 6 --record \
     --json > "$res/decisive/$name.json" 2> "$res/decisive/$name.log"
   say "decisive-$name rc $?") &
  jobs+=($!)
}
decisive as-found as-found
decisive runner-v1 runner-v1
decisive no-prefix-cache no-prefix-cache
decisive scale-fill-mend as-found HYBRIDFUZZ_MEND=scale-fill
cp "$next/427e4a18-before-s35.yaml" "$res/shrink/427e4a18.yaml"
say "shrink-427e4a18 start budget ${PHASE1:-600}s workers 6"
(hf shrink "$res/shrink/427e4a18.yaml" --budget "${PHASE1:-600}s" --workers 6 --json \
   --signature self_consistency:wake-differs:427e4a18 > "$res/shrink/427e4a18.json" 2> "$res/shrink/427e4a18.log"
 say "shrink-427e4a18 rc $?") &
jobs+=($!)
say "calibrate start"
(hf calibrate --kv-dtypes nvfp4 --pairs 24 --seed 0 --workers 4 \
   --save "$res/calib/nvfp4-pairs.json" > "$res/calib/nvfp4.json" 2> "$res/calib/nvfp4.log"
 say "calibrate rc $?") &
jobs+=($!)
wait "${jobs[@]}"; jobs=()
lease_end
