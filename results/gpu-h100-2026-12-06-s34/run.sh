#!/usr/bin/env bash
# The plan for s34's lease (one GPU, vLLM 0.33.0), cut from results/gpu-h100-2026-12-05-s33/run-next.sh on 2026-12-06
# after five refusals had spent 721 s of the session's device time: #12's third item first.
#   phase 1 (PHASE1 s, together): 427e4a18 (1 layer, 4 steps, budget ended) and c5daf501 (15-token copies, budget
#            ended) shrunk on, tries from their recorded rates; `calibrate` of fp8 (e4m3) against auto, 48 pairs, seed
#            0, saved: fp8's QUANTIZED tolerance was calibrated on CPU only;
#   phase 2 (alone on the GPU, if 180 s are left): e15d36c9 toward its cuBLAS device fault (1 run in 6 on s33's H100).
#            11c48cea (0 of 9 on s33's H100) is left out.
# Started detached (gpu/bg.sh) by the first device call, from a copy of the checkout in /tmp/repo, with LEASE_LEFT and
# PHASE1 (gpu/README.md).
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_begin 38
shrink_job 427e4a18 6 "${PHASE1:-360}" zamba2-int4-per-token-head-graphs-wake-differs
shrink_job c5daf501 6 "${PHASE1:-360}" zamba2-int4-per-token-head-same-batch-differs
mkdir -p "$res/calib"
say "calibrate start"
(hf calibrate --kv-dtypes fp8 --pairs 48 --seed 0 --workers 4 \
   --save "$res/calib/fp8-pairs.json" > "$res/calib/fp8.json" 2> "$res/calib/fp8.log"
 say "calibrate rc $?") &
jobs+=($!)
shrink_alone e15d36c9 zamba2-int4-per-token-head-crash --signature health:device-fault:daf61b86
lease_end
