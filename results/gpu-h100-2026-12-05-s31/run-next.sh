#!/usr/bin/env bash
# The plan for the next lease (one GPU, 16 cores), written 2026-12-05 in the thirty-first session after
# results/gpu-h100-2026-12-05-s31/README.md: what #12's third item still lacks, with GPU-fault cases kept apart.
#   phase 1 (PHASE1 s, together; none of these has faulted the GPU): the partial shrinks resumed from their corpus
#            files, each kept to its recorded finding (shrink's default since s31): ef8dca8d (3 slots), c5daf501 (3),
#            6e91af78 (2; reproduces about half the time, so a shrink gives each variant one run and may stop early);
#   phase 2 (what is left, ALONE on the GPU): 11c48cea toward its GPU fault, one variant at a time (shrink.py
#            variants_at_once), `--signature health:device-fault:daf61b86` (oracles/health.py device_fault_signature
#            of the case: its file records the crash as SIGABRT, from before device faults had a signature).
# gpu/lease.sh's sampler stops every job if the GPU says it needs a reset. Started detached (gpu/bg.sh) by the FIRST
# device call, from a copy of the checkout in /tmp/repo, while the other calls bring the bundle's parts
# (gpu/make-bundle.sh 0.33.0 .gpu/s33, 38 parts).
set -u
cd "$(dirname "$0")/../.."
here=$PWD
start=$(date +%s)
deadline=$((start + ${LEASE_LEFT:-1530}))   # host clock by which phase 2 must be over (confirmation included)
source gpu/lease.sh 33
lease_sampler
lease_install 38

shrink_job ef8dca8d 3 "${PHASE1:-600}" falcon-h1-graphs-one-token-prompt-repeat-differs
shrink_job c5daf501 3 "${PHASE1:-600}" zamba2-int4-per-token-head-same-batch-differs
shrink_job 6e91af78 2 "${PHASE1:-600}" zamba2-int4-per-token-head-reload-differs-7
wait "${jobs[@]}"; jobs=()
say "phase 1 done"

phase2=$((deadline - $(date +%s) - 150))   # 150 s for the confirmation on a fresh engine
if lease_gpu_lost; then
  say "phase 2 skipped: the GPU is lost"
elif [ "$phase2" -ge 180 ]; then
  shrink_job 11c48cea 1 "$phase2" zamba2-int4-per-token-head-warm-history-crash --signature health:device-fault:daf61b86
  wait "${jobs[@]}"
else
  say "phase 2 skipped: ${phase2}s left"
fi
lease_end
