#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-03, twentieth session; started detached with gpu/bg.sh
# from a copy of the checkout in /tmp/repo. vLLM 0.32.0 (bundle parts in /tmp/p32, gpu/make-bundle.sh 0.32.0);
# py-spy 0.4.2's binary in /tmp/py-spy. Cold kernel caches (none carried). The nineteenth session's run again, on the
# code that came of its profile (bytecode compiled at install, HUMMING_DISABLE_PARALLEL_BUILD=1, workers that adopt
# vLLM's facts): does the default campaign now reach 100 cases/min? In order:
#   1. a warm-up campaign (its own directory, seed 1, $WARM s), profiled: fills Triton's and FlashInfer's caches;
#   2. the measured campaign with defaults only (seed 0, no narrowing flags; it knows ./corpus, as in a checkout):
#        hybridfuzz campaign --engine gpu --dir $res/c32 --budget 600s
#      profiled by py-spy at 5 Hz (gpu/timed-campaign.sh HF_PYSPY);
#   3. while device time lasts: the deciding replays of the nineteenth session's two unconfirmed
#      self-consistency leads (72d51891, fd0d6889).
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
warm=${WARM:-270}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
grep -h "bytecode" "$res"/*.log "$res/platform32.txt" >> "$res/chain.log" 2>/dev/null
caches() { echo "caches $1: triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB, vllm $(du -sm ~/.cache/vllm 2>/dev/null | cut -f1) MB, flashinfer $(du -sm ~/.cache/flashinfer 2>/dev/null | cut -f1) MB $(date -u +%T)" >> "$res/chain.log"; }
sweep() { pkill -f "hybridfuzz.engines.forkserve[r]"; sleep 2; pkill -9 -f "hybridfuzz.engines.forkserve[r]"; }
spy=""; [ -x /tmp/py-spy ] && spy=/tmp/py-spy
caches before-warm
HF_PYSPY=$spy bash gpu/timed-campaign.sh 32 warm32 "$warm" 30 --seed 1
sweep; caches after-warm
HF_PYSPY=$spy bash gpu/timed-campaign.sh 32 c32 600 60
sweep; caches after-c32
for lead in self_consistency_first-request-differs_72d51891 self_consistency_reload-differs_fd0d6889; do
  echo "replay $lead start $(date -u +%T)" >> "$res/chain.log"
  timeout 240 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- replay "results/gpu-h200-2026-12-03-s19/res/c32/findings/$lead.yaml" \
      --runs 1 --timeout 200 --json > "$res/replay-$lead.json" 2> "$res/replay-$lead.err"
  echo "replay $lead rc $? $(date -u +%T)" >> "$res/chain.log"
  sweep
done
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
