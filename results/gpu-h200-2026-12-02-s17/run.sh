#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-02, seventeenth session; started detached with gpu/bg.sh
# from a copy of the checkout in /tmp/repo. vLLM 0.32.0 (bundle parts in /tmp/p32, gpu/make-bundle.sh 0.32.0).
# The host starts with cold kernel caches (none carried), so:
#   1. a warm-up campaign (its own directory, seed 1, $WARM s);
#   2. the engines' GPU wait schedule measured both ways, at once-started engines (engines/cuda_sync.py):
#        HYBRIDFUZZ_CUDA_SYNC=spin  hybridfuzz bench --at-once 24 --json     (CUDA's own choice here: spin)
#        HYBRIDFUZZ_CUDA_SYNC=block hybridfuzz bench --at-once 24 --json     (the default since this session)
#   3. the measured campaign with defaults only (seed 0, no narrowing flags; it knows ./corpus, as in a checkout):
#        hybridfuzz campaign --engine gpu --dir $res/c32 --budget 600s
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
warm=${WARM:-330}
hf() { bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
hf platform > "$res/platform32.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
hf python3 -m vllm.collect_env > "$res/collect_env32.txt" 2>&1
caches() { echo "caches $1: triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB, flashinfer $(du -sm ~/.cache/flashinfer 2>/dev/null | cut -f1) MB $(date -u +%T)" >> "$res/chain.log"; }
sweep() { pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver; }
caches before-warm
bash gpu/timed-campaign.sh 32 warm32 "$warm" 30 --seed 1
sweep; caches after-warm
for mode in spin block; do
  echo "bench $mode start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$res/chain.log"
  HYBRIDFUZZ_CUDA_SYNC=$mode timeout 240 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- bench --at-once 24 --json > "$res/bench-$mode.json" 2> "$res/bench-$mode.err"
  echo "bench $mode rc $? $(date -u +%T)" >> "$res/chain.log"
  sweep
done
bash gpu/timed-campaign.sh 32 c32 600 60
sweep; caches after-c32
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
