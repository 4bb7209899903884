#!/usr/bin/env bash
# For the next GPU session (written 2026-12-02, seventeenth session; NOT run yet). One H200, vLLM 0.32.0 bundle parts in
# /tmp/p32 (gpu/make-bundle.sh 0.32.0), started detached with gpu/bg.sh from /tmp/repo, as run.sh beside it.
# Measures Triton's autotuning cache (TRITON_CACHE_AUTOTUNING, engines/base.py ENGINE_DEFAULTS) where run.sh had a
# warm-up, then the default campaign, inside one 1800 s device budget (gpu/README.md: the setup takes about 400 s):
#   1-2. TRITON_CACHE_AUTOTUNING=0 bench --at-once 24, twice: the first compiles (cold host), the second is the baseline
#        (compiled kernels cached, every engine tunes again);
#   3-4. TRITON_CACHE_AUTOTUNING=1, twice: the first stores the tuning results, the second starts 24 engines that reuse them;
#   5.   campaign --engine gpu --budget 600s (defaults: the cache on, engines waiting asleep).
# Compare 2 and 4 (startup_median_s, wall_s, cases_per_min in bench-*.json), then 5 against s16/s17 (82/min).
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
hf() { bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- "$@"; }
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.log" 2>&1 &
sampler=$!
hf platform > "$res/platform32.log" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
sweep() { pkill -f "hybridfuzz.engines.forkserve[r]"; sleep 2; pkill -9 -f "hybridfuzz.engines.forkserve[r]"; }
for step in 0a 0b 1a 1b; do
  echo "bench $step start $(date -u +%T)" >> "$res/chain.log"
  TRITON_CACHE_AUTOTUNING=${step:0:1} timeout 300 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- bench --at-once 24 --json > "$res/bench-$step.json" 2> "$res/bench-$step.err"
  echo "bench $step rc $? $(date -u +%T) triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB" >> "$res/chain.log"
  sweep
done
bash gpu/timed-campaign.sh 32 c32 600 60
sweep
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
