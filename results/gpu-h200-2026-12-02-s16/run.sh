#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-02, sixteenth session; started detached with gpu/bg.sh
# from a copy of the checkout in /tmp/repo. vLLM 0.32.0 (bundle parts in /tmp/p32, gpu/make-bundle.sh 0.32.0).
# The host starts with cold kernel caches (none carried), so first a warm-up campaign (its own directory, seed 1),
# then the measured campaign with defaults only (seed 0, no narrowing flags; it knows ./corpus, as in a checkout):
#   hybridfuzz campaign --engine gpu --dir $res/c32 --budget 600s
# A sampler writes the host's load and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
warm=${WARM:-300}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- python3 -m vllm.collect_env > "$res/collect_env32.txt" 2>&1
caches() { echo "caches $1: triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB, flashinfer $(du -sm ~/.cache/flashinfer 2>/dev/null | cut -f1) MB" >> "$res/chain.log"; }
caches before-warm
bash gpu/timed-campaign.sh 32 warm32 "$warm" 30 --seed 1
pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
caches after-warm
bash gpu/timed-campaign.sh 32 c32 600 60
pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
caches after-c32
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
