#!/usr/bin/env bash
# The H200-pair session of 2026-11-30 (fourth session): default campaigns, no narrowing flags.
# GPU 1 (cores 16-31): vLLM 0.33.0, `campaign --engine gpu --budget 20m` (issue #12's 20-minute 0.33.0 run).
# GPU 0 (cores 0-15):  vLLM 0.26.0, `campaign --engine gpu --budget 10m` without corpus/gpu's signatures known
#                      (issue #12: find the wake-up crash unaided; #13: other sleep/wake bugs);
#                      then the GPU wake-up case bisected over the two bundles;
#                      then `fuzz --host server` (vllm serve, requests in flight) for 3 minutes (#13).
# Parts in /tmp/p26 /tmp/p33, SHA256 in /tmp/sha26 /tmp/sha33. Logs in $HF_RES (default /tmp/res).
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
known="--known corpus/found --known corpus/seeds --known corpus/families --known corpus/components"
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- campaign --engine gpu --dir "$res/c26" --budget 10m $known > "$res/c26.log" 2>&1
  echo "c26 rc $?" >> "$res/chain.log"
  # site33 is installed by GPU 1's job by now
  cp corpus/gpu/wake-up-zero-list-vllm-0.26.0.yaml "$res/wake-bisect.yaml"
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- bisect "$res/wake-bisect.yaml" --engine gpu \
      --sites 0.26.0=/tmp/site26,0.33.0=/tmp/site33 --fresh --json > "$res/wake-bisect.log" 2>&1
  echo "bisect rc $?" >> "$res/chain.log"
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- fuzz --engine gpu --host server --workers 6 --budget 3m \
      --out "$res/srv26" --findings "$res/srv26/findings" $known > "$res/srv26.log" 2>&1
  echo "srv26 rc $?" >> "$res/chain.log"
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  taskset -c 16-31 bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- campaign --engine gpu --dir "$res/c33" --budget 20m > "$res/c33.log" 2>&1
  echo "c33 rc $?" >> "$res/chain.log"
}
# `run.sh gpu0` / `run.sh gpu1` start one chain (GPU 0's starts while GPU 1's bundle is still being copied).
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  gpu0) bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/platform26.txt" 2>&1; gpu0 ;;
  gpu1) bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 -- platform > "$res/platform33.txt" 2>&1; gpu1 ;;
  *) echo "usage: run.sh gpu0|gpu1" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
