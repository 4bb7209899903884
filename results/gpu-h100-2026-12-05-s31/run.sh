#!/usr/bin/env bash
# The plan for the thirty-first session's lease (one GPU, 16 cores), written 2026-12-05: what #12's third acceptance
# item still lacks after results/gpu-h200-2026-12-05-s30/README.md, in ONE phase (s30's run-next.sh had two, but with
# the three finished shrinks gone, all six jobs fit in 15 engine slots at once):
#   shrinks resumed from their corpus files, each to the same deadline: 11c48cea (8 layers, 54 steps; 5 slots),
#   e15d36c9 (1 layer, 6 steps; 3), ef8dca8d (1 layer, 3 steps; 3), c5daf501 (2 layers, 2 steps; 2);
#   the two sometimes-reproducing int4 cases measured, `replay --runs 6 --record` (one engine each, in turn).
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, while the other
# calls bring the bundle's parts (gpu/make-bundle.sh 0.33.0 .gpu/s33, 38 parts). A shrink's --budget is its whole
# command's wall clock (e138372); its confirming replay on a fresh engine follows, allowed CONFIRM s.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
start=$(date +%s)
res=${HF_RES:-/tmp/res}; mkdir -p "$res/shrink" "$res/replay"
deadline=$((start + ${LEASE_LEFT:-1530}))   # host clock by which every job must be over (confirmation included)
confirm=${CONFIRM:-120}
hf() { bash "$here/gpu/hf.sh" /tmp/p33 /tmp/sha33 /tmp/site33 -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do
   line=$(nvidia-smi --query-gpu=utilization.gpu,memory.used,pstate,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader,nounits 2>&1 | head -1)
   echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) gpu $line"
   case $line in *[Ee]rror*|*[Ff]ail*|*"No devices"*) nvidia-smi -q 2>&1 | grep -i -A2 "xid\|retired\|remap\|pending" | head -30; dmesg 2>&1 | tail -20;; esac
 done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
HF_PARTS_COUNT=38 hf platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
budget=$((deadline - $(date +%s) - confirm))
echo "budget ${budget}s for every shrink $(date -u +%T)" >> "$res/chain.log"

jobs=()
shrink_job() {  # shrink_job SIG WORKERS CORPUS_FILE: shrink a copy of the corpus case into $res/shrink/SIG.*
  local sig=$1 workers=$2 src=$here/corpus/gpu/$3-vllm-0.33.0.yaml
  cp "$src" "$res/shrink/$sig.yaml"
  echo "shrink-$sig start budget ${budget}s workers $workers $(date -u +%T)" >> "$res/chain.log"
  (hf shrink "$res/shrink/$sig.yaml" --budget "${budget}s" --workers "$workers" --json > "$res/shrink/$sig.json" 2> "$res/shrink/$sig.log"
   echo "shrink-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
replay_job() {  # replay_job SIG CORPUS_FILE: 6 fresh runs of a copy of the corpus case, recorded into the copy
  local sig=$1 src=$here/corpus/gpu/$2-vllm-0.33.0.yaml
  cp "$src" "$res/replay/$sig.yaml"
  echo "replay-$sig start $(date -u +%T)" >> "$res/chain.log"
  (hf replay "$res/replay/$sig.yaml" --runs 6 --record --json > "$res/replay/$sig.json" 2> "$res/replay/$sig.log"
   echo "replay-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
if [ "$budget" -ge 120 ]; then
  shrink_job 11c48cea 5 zamba2-int4-per-token-head-warm-history-crash
  shrink_job e15d36c9 3 zamba2-int4-per-token-head-crash
  shrink_job ef8dca8d 3 falcon-h1-fp8-warm-history-one-token-prompt
  shrink_job c5daf501 2 zamba2-int4-per-token-head-same-batch-differs
else
  echo "shrinks skipped: ${budget}s left $(date -u +%T)" >> "$res/chain.log"
fi
replay_job 6e91af78 zamba2-int4-per-token-head-reload-differs-7
replay_job 427e4a18 zamba2-int4-per-token-head-graphs-wake-differs
wait "${jobs[@]}"
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
