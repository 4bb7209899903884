#!/usr/bin/env bash
# The plan for the next lease (one GPU, 16 cores, vLLM 0.33.0), written 2026-12-06 in the thirty-fourth session after
# results/gpu-h100-2026-12-06-s34/README.md: #12's third item still lacks minimal cases for 427e4a18, c5daf501 and
# e15d36c9; a 240 s shrink kept nothing for the first two (3-6 tries a batch), so each gets the whole phase.
#   phase 1 (PHASE1 s, together): 427e4a18 and c5daf501 shrunk on; e15d36c9 toward its device fault (5 of 6 runs in
#            s34, beside one other replay: it needs no GPU of its own); `calibrate` of the dtypes s34 could not reach
#            (fp8_e5m2, int8_per_token_head, fp8_per_token_head) against auto, 48 pairs, seed 0, saved;
#   phase 2 (alone on the GPU): 11c48cea toward its device-side assert (0 of 18 runs since s32's 2 of 3).
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, with LEASE_LEFT and
# PHASE1 (gpu/README.md). gpu/lease.sh's sampler stops every job if the GPU needs a reset.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_begin 38
shrink_job 427e4a18 6 "${PHASE1:-600}" zamba2-int4-per-token-head-graphs-wake-differs
shrink_job c5daf501 6 "${PHASE1:-600}" zamba2-int4-per-token-head-same-batch-differs
shrink_job e15d36c9 4 "${PHASE1:-600}" zamba2-int4-per-token-head-crash --signature health:device-fault:daf61b86
mkdir -p "$res/calib"
say "calibrate start"
(hf calibrate --kv-dtypes fp8_e5m2,int8_per_token_head,fp8_per_token_head --pairs 48 --seed 0 --workers 4 \
   --save "$res/calib/quantized-pairs.json" > "$res/calib/quantized.json" 2> "$res/calib/quantized.log"
 say "calibrate rc $?") &
jobs+=($!)
shrink_alone 11c48cea zamba2-int4-per-token-head-one-prompt-device-fault --signature health:device-fault:daf61b86
lease_end
