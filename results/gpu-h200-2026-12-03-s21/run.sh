#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-03, twenty-first session; started detached with
# gpu/bg.sh from a copy of the checkout in /tmp/repo. vLLM 0.33.0 (bundle parts in /tmp/p33, gpu/make-bundle.sh
# 0.33.0); cold kernel caches, no warm-up. Issue #12's last acceptance run, in order:
#   1. install the bundle (`hf.sh ... platform`);
#   2. the seed-1 probes (this folder's probe-*.yaml: the engine's first request and a repeat, int8_per_token_head
#      on TRITON_ATTN, eager, short and long memory, and an auto control), three replays beside the campaign;
#   3. an 11-minute campaign with defaults only (the first machine was taken back 150 s into the install: no
#      device time was left for 20 minutes) (it knows ./corpus, as any checkout does):
#        hybridfuzz campaign --engine gpu --dir $res/c33 --budget 660s
#      SIGINT 90 s after its budget (the wind-down replays every queued finding once on a fresh engine).
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
here=results/gpu-h200-2026-12-03-s21
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
probes=()
for p in probe-seed1-int8-short probe-seed1-int8-long probe-seed1-auto-long; do
  ( echo "$p start $(date -u +%T)" >> "$res/chain.log"
    timeout 900 bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- replay "$here/$p.yaml" --runs 1 --timeout 400 --json \
        > "$res/$p.json" 2> "$res/$p.err"
    echo "$p rc $? $(date -u +%T)" >> "$res/chain.log" ) &
  probes+=($!)
done
bash gpu/timed-campaign.sh 33 c33 660 90
wait "${probes[@]}"
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
