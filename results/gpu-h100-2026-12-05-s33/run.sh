#!/usr/bin/env bash
# The thirty-third session's lease plan (one GPU, 16 cores, vLLM 0.33.0): s32's run-next.sh
# (results/gpu-h100-2026-12-05-s32/run-next.sh) plus one calibration of int4_per_token_head against auto, the KV dtype
# of every partial shrink here and the one the reference oracle still judges with fp8's tolerance (4dedba44's triage).
#   phase 1 (PHASE1 s, together): c5daf501, 6e91af78, e15d36c9, 427e4a18 and 4dedba44 shrunk with tries from their
#            recorded rates (shrink's default), 4 workers each; `calibrate` on 32 clean int4-vs-auto pairs, 2 workers;
#   phase 2 (ALONE on the GPU): 11c48cea toward its GPU fault, one variant at a time, until the deadline.
# Started detached by the FIRST device call from /tmp/repo with LEASE_LEFT and PHASE1 (gpu/README.md).
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_begin 38
shrink_job c5daf501 4 "${PHASE1:-600}" zamba2-int4-per-token-head-same-batch-differs
shrink_job 6e91af78 4 "${PHASE1:-600}" zamba2-int4-per-token-head-reload-differs-7
shrink_job e15d36c9 4 "${PHASE1:-600}" zamba2-int4-per-token-head-crash
shrink_job 427e4a18 4 "${PHASE1:-600}" zamba2-int4-per-token-head-graphs-wake-differs
shrink_job 4dedba44 4 "${PHASE1:-600}" qwen3-next-int4-per-token-head-reference
mkdir -p "$res/calib"
say "calibrate start"
(hf calibrate --kv-dtypes int4_per_token_head --pairs 32 --seed 0 --workers 2 --save "$res/calib/int4-pairs.json" \
   > "$res/calib/int4.json" 2> "$res/calib/int4.log"
 say "calibrate rc $?") &
jobs+=($!)
shrink_alone 11c48cea zamba2-int4-per-token-head-one-prompt-device-fault --signature health:device-fault:daf61b86
lease_end
