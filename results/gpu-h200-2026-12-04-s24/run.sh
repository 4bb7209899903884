#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-04 UTC, twenty-fourth session: issue #12's acceptance
# run on vLLM 0.33.0. Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in
# /tmp/repo, while the other 37 calls still bring the bundle's 44 MiB parts (gpu/make-bundle.sh 0.33.0, re-split):
#   1. install: HF_PARTS_COUNT=38 makes install-on-host.sh read each part as its call moves it into /tmp/p33;
#   2. the 20-minute campaign with defaults only and nothing beside it, 150 s of wind-down before SIGINT:
#        hybridfuzz campaign --engine gpu --dir $res/c33 --budget 1200s
# The corpus now knows the signatures s21-s23 triaged (corpus/gpu, corpus/noise). Cold kernel caches, no warm-up. A sampler writes the host's load, CPU and GPU use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
HF_PARTS_COUNT=38 bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
bash gpu/timed-campaign.sh 33 c33 1200 150
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
