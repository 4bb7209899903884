#!/usr/bin/env bash
# The plan for the next lease (one GPU, 16 cores, vLLM 0.33.0), written 2026-12-05 in the thirty-third session after
# results/gpu-h100-2026-12-05-s33/README.md: what #12's third item still lacks, and the other quantized dtypes' GPU
# calibration (fp8's QUANTIZED was calibrated on CPU; int4 got INT4 in s33).
#   phase 1 (PHASE1 s, together): 427e4a18 (1 layer, 4 steps, budget ended) and c5daf501 (15-token copies, budget
#            ended) shrunk on with tries from their recorded rates; `calibrate` of fp8, fp8_e4m3, fp8_e5m2,
#            int8_per_token_head and fp8_per_token_head against auto (64 pairs, seed 0; its saved pairs calibrate,
#            a later seed validates);
#   phase 2 (ALONE on the GPU): e15d36c9 toward its cuBLAS device fault (1 run in 6 on s33's H100), then 11c48cea
#            toward its device-side assert (2 of 3 on s32's H100, 0 of 9 on s33's), each one variant at a time.
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, with LEASE_LEFT and
# PHASE1 (gpu/README.md). gpu/lease.sh's sampler stops every job if the GPU needs a reset.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_begin 38
shrink_job 427e4a18 6 "${PHASE1:-480}" zamba2-int4-per-token-head-graphs-wake-differs
shrink_job c5daf501 6 "${PHASE1:-480}" zamba2-int4-per-token-head-same-batch-differs
mkdir -p "$res/calib"
say "calibrate start"
(hf calibrate --kv-dtypes fp8,fp8_e4m3,fp8_e5m2,int8_per_token_head,fp8_per_token_head --pairs 64 --seed 0 --workers 4 \
   --save "$res/calib/quantized-pairs.json" > "$res/calib/quantized.json" 2> "$res/calib/quantized.log"
 say "calibrate rc $?") &
jobs+=($!)
share=50 shrink_alone e15d36c9 zamba2-int4-per-token-head-crash --signature health:device-fault:daf61b86
shrink_alone 11c48cea zamba2-int4-per-token-head-one-prompt-device-fault --signature health:device-fault:daf61b86
lease_end
