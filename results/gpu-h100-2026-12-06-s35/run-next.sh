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
mkdir -p "$res/calib"
replay_file as-found 6 "$next/as-found.yaml"
replay_file runner-v1 6 "$next/runner-v1.yaml"
replay_file no-prefix-cache 6 "$next/no-prefix-cache.yaml"
replay_file scale-fill-mend 6 "$next/as-found.yaml" HYBRIDFUZZ_MEND=scale-fill
shrink_file 427e4a18 6 "${PHASE1:-600}" "$next/427e4a18-before-s35.yaml" --signature self_consistency:wake-differs:427e4a18
say "calibrate start"
(hf calibrate --kv-dtypes nvfp4 --pairs 24 --seed 0 --workers 4 \
   --save "$res/calib/nvfp4-pairs.json" > "$res/calib/nvfp4.json" 2> "$res/calib/nvfp4.log"
 say "calibrate rc $?") &
jobs+=($!)
wait "${jobs[@]}"; jobs=()
lease_end
