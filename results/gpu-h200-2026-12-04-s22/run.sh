#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-04 UTC, twenty-second session; started detached with
# gpu/bg.sh from a copy of the checkout in /tmp/repo. vLLM 0.33.0 (bundle parts in /tmp/p33, gpu/make-bundle.sh
# 0.33.0); cold kernel caches, no warm-up. Issue #12's last acceptance run:
#   1. install the bundle (`hf.sh ... platform`);
#   2. a 20-minute campaign with defaults only (it knows ./corpus, as any checkout does):
#        hybridfuzz campaign --engine gpu --dir $res/c33 --budget 1200s
#      SIGINT 60 s after its budget (the wind-down replays every queued finding once on a fresh engine): a 0.33.0
#      session spends about 480 s before its campaign starts, and 1800 s is all the device time there is.
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
bash gpu/timed-campaign.sh 33 c33 1200 60
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
