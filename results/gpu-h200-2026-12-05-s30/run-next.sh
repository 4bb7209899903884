#!/usr/bin/env bash
# The plan for the next lease (one H200, device tool kind nvidia-h200, 16 cores), written 2026-12-05 in the thirtieth
# session: what #12's third acceptance item still lacks after results/gpu-h200-2026-12-05-s30/README.md.
#   phase 1: the two partial shrinks resumed from their corpus files (ef8dca8d 4 slots, c5daf501 2) and the two
#            sometimes-reproducing int4 cases measured (`replay --runs 4 --record`, 2 slots each), budget PHASE1 s;
#   phase 2: the two engine-killing int4 crash cases (e15d36c9, 11c48cea; 4 slots each), with what is left.
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, while the other
# calls bring the bundle's parts (gpu/make-bundle.sh 0.33.0 .gpu/s33, 38 parts). Since e138372 a shrink's --budget is
# its whole command's wall clock.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
start=$(date +%s)
res=${HF_RES:-/tmp/res}; mkdir -p "$res/shrink"
phase1=${PHASE1:-600}
deadline=$((start + ${LEASE_LEFT:-1530}))   # host clock by which phase 2 must be over (confirmation included)
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

jobs=()
shrink_job() {  # shrink_job SIG WORKERS BUDGET CORPUS_FILE: shrink a copy of the corpus case into $res/shrink/SIG.*
  local sig=$1 workers=$2 budget=$3 src=$here/corpus/gpu/$4-vllm-0.33.0.yaml
  cp "$src" "$res/shrink/$sig.yaml"
  echo "shrink-$sig start budget ${budget}s workers $workers $(date -u +%T)" >> "$res/chain.log"
  (hf shrink "$res/shrink/$sig.yaml" --budget "${budget}s" --workers "$workers" --json > "$res/shrink/$sig.json" 2> "$res/shrink/$sig.log"
   echo "shrink-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
replay_job() {  # replay_job SIG CORPUS_FILE: 4 fresh runs of a copy of the corpus case, recorded into the copy
  local sig=$1 src=$here/corpus/gpu/$2-vllm-0.33.0.yaml
  mkdir -p "$res/replay"; cp "$src" "$res/replay/$sig.yaml"
  echo "replay-$sig start $(date -u +%T)" >> "$res/chain.log"
  (hf replay "$res/replay/$sig.yaml" --runs 4 --record --json > "$res/replay/$sig.json" 2> "$res/replay/$sig.log"
   echo "replay-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
shrink_job ef8dca8d 4 "$phase1" falcon-h1-fp8-warm-history-one-token-prompt
shrink_job c5daf501 2 "$phase1" zamba2-int4-per-token-head-same-batch-differs
replay_job 6e91af78 zamba2-int4-per-token-head-reload-differs-7
replay_job 427e4a18 zamba2-int4-per-token-head-graphs-wake-differs
wait "${jobs[@]}"
echo "phase 1 done $(date -u +%T)" >> "$res/chain.log"

jobs=()
phase2=$((deadline - $(date +%s) - 120))   # 120 s for the confirmation on a fresh engine
if [ "$phase2" -ge 120 ]; then
  shrink_job e15d36c9 4 "$phase2" zamba2-int4-per-token-head-crash
  shrink_job 11c48cea 4 "$phase2" zamba2-int4-per-token-head-warm-history-crash
  wait "${jobs[@]}"
else
  echo "phase 2 skipped: ${phase2}s left $(date -u +%T)" >> "$res/chain.log"
fi
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
