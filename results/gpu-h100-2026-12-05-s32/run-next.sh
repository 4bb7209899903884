#!/usr/bin/env bash
# The plan for the next lease (one GPU, 16 cores), written 2026-12-05 in the thirty-second session after
# results/gpu-h100-2026-12-05-s32/README.md: what #12's third item still lacks.
#   phase 1 (PHASE1 s, together; none of these has faulted the GPU): the findings that show only sometimes, shrunk with
#            tries from their recorded rates (shrink's default since s32: c5daf501 1 of 3 and 1 of 1 -> 6 tries a batch,
#            6e91af78 2 of 3 -> 5), e15d36c9 toward its recorded ed3b0256 (4 of 5 -> 3), and the two the campaign's
#            150-s shrinker left large: 427e4a18 (4 layers, 4 steps, graphs; 7 of 8 -> 3) and 4dedba44 (8 layers, 1 step);
#   phase 2 (what is left, ALONE on the GPU): 11c48cea on from its 2-layer, 1-step form toward its GPU fault, one
#            variant at a time (2 of 4 recorded runs -> 6 tries).
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, with LEASE_LEFT (the
# device time left, less the part calls' ~260 s) and PHASE1, while the other calls bring the bundle's parts
# (gpu/make-bundle.sh 0.33.0 .gpu/s33, 38 parts). gpu/lease.sh's sampler stops every job if the GPU needs a reset.
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
shrink_alone 11c48cea zamba2-int4-per-token-head-one-prompt-device-fault --signature health:device-fault:daf61b86
lease_end
