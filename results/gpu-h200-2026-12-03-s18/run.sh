#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-03, eighteenth session; started detached with gpu/bg.sh
# from a copy of the checkout in /tmp/repo. vLLM 0.32.0 (bundle parts in /tmp/p32, gpu/make-bundle.sh 0.32.0).
# Cold kernel caches (none carried). The seventeenth session's next-ab.sh, with one bench fewer:
#   1. Triton's autotuning cache (TRITON_CACHE_AUTOTUNING, engines/base.py ENGINE_DEFAULTS), 24 engines at once:
#        1a  TRITON_CACHE_AUTOTUNING=1 hybridfuzz bench --at-once 24 --json   cold host: compiles, tunes, stores
#        1b  TRITON_CACHE_AUTOTUNING=1 (the same)                              compiled, tuning results reused
#        0b  TRITON_CACHE_AUTOTUNING=0 (the same)                              compiled, every engine tunes again
#      1b against 0b is the measurement (startup_median_s, startup_cpu_median_s, wall_s);
#   2. the measured campaign with defaults only (seed 0, no narrowing flags; it knows ./corpus, as in a checkout):
#        hybridfuzz campaign --engine gpu --dir $res/c32 --budget 600s
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
hf() { bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
hf platform > "$res/platform32.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
caches() { echo "caches $1: triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB $(date -u +%T)" >> "$res/chain.log"; }
sweep() { pkill -f "hybridfuzz.engines.forkserve[r]"; sleep 2; pkill -9 -f "hybridfuzz.engines.forkserve[r]"; }
for step in 1a 1b 0b; do
  echo "bench $step start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$res/chain.log"
  TRITON_CACHE_AUTOTUNING=${step:0:1} timeout 240 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- bench --at-once 24 --json > "$res/bench-$step.json" 2> "$res/bench-$step.err"
  echo "bench $step rc $? $(date -u +%T)" >> "$res/chain.log"
  sweep; caches "after-$step"
done
bash gpu/timed-campaign.sh 32 c32 600 60
sweep
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
