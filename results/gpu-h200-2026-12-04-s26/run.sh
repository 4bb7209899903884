#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-04 UTC, twenty-sixth session: the shrinks issue #12's
# third acceptance item still lacked after s25 (results/gpu-h200-2026-12-04-s25/README.md, "Not fully met").
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, while the other 37
# calls bring the bundle's parts (gpu/make-bundle.sh 0.33.0 .gpu/s33). After the install, all at once:
#   - the six shrinks cut short (s24's 150-s background shrinks and s25's two interrupted ones), from their corpus files;
#   - the two s25 shrinks whose last variants never ran (the host lost its GPU), resumed from their corpus files;
#   - the one whose budget ended (4e783eaf, already 1 layer and 1 step): finish it and confirm it.
# The two warm-history cases (hundreds of steps) get 4 engines each, the rest 2 (16 cores in all).
# The sampler also records what nvidia-smi says when it stops seeing the GPU (s25 lost it at about 18:04, cause unknown).
set -u
cd "$(dirname "$0")/../.."
here=$PWD
res=${HF_RES:-/tmp/res}; mkdir -p "$res/shrink"
budget=${SHRINK_BUDGET:-1000}
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
shrink_job() {  # shrink_job SIG WORKERS CORPUS_FILE: shrink a copy of the corpus case into $res/shrink/SIG.*
  local sig=$1 workers=$2 src=$here/corpus/gpu/$3-vllm-0.33.0.yaml
  cp "$src" "$res/shrink/$sig.yaml"
  (hf shrink "$res/shrink/$sig.yaml" --budget "${budget}s" --workers "$workers" --json > "$res/shrink/$sig.json" 2> "$res/shrink/$sig.log"
   echo "shrink-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
shrink_job ef8dca8d 4 falcon-h1-fp8-warm-history-one-token-prompt
shrink_job 11c48cea 4 zamba2-int4-per-token-head-warm-history-crash
shrink_job e0d58277 2 lfm2-conv-only-graphs-one-token-prompt-after-wake
shrink_job 427e4a18 2 zamba2-int4-per-token-head-graphs-wake-differs
shrink_job c5daf501 2 zamba2-int4-per-token-head-same-batch-differs
shrink_job bfecd3c0 2 granite-int8-per-token-head-graphs-nonfinite
shrink_job e15d36c9 2 zamba2-int4-per-token-head-crash
shrink_job 6e91af78 2 zamba2-int4-per-token-head-reload-differs-7
shrink_job 4e783eaf 2 falcon-h1-fp8-graphs-one-token-prompt-reference
wait "${jobs[@]}"
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
