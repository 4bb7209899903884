#!/usr/bin/env bash
# The H200-pair run of 2026-11-30 (sixth session): default campaigns with the new throughput defaults
# (12 cases per engine start, 2 engine slots per core, refusal memory), no narrowing flags.
# GPU 0 (cores 0-15):  vLLM 0.26.0, `campaign --engine gpu --budget 10m`, corpus/gpu's signatures not known
#                      (#12: throughput, the fp8 wake-up crash unaided; #13: other sleep/wake bugs);
#                      then `fuzz --host server` (vllm serve, requests in flight) for 6 minutes (#13).
# GPU 1 (cores 16-31): vLLM 0.32.0, `campaign --engine gpu --budget 15m`, corpus/gpu's signatures not known (#13, #12).
# Parts in /tmp/p26 /tmp/p32, SHA256 in /tmp/sha26 /tmp/sha32. Logs in $HF_RES (default /tmp/res).
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
known="--known corpus/found --known corpus/seeds --known corpus/families --known corpus/components"
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- campaign --engine gpu --dir "$res/c26" --budget 10m $known > "$res/c26.log" 2>&1
  echo "c26 rc $? $(date -u +%T)" >> "$res/chain.log"
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- fuzz --engine gpu --host server --workers 6 --budget 6m \
      --out "$res/srv26" --findings "$res/srv26/findings" $known > "$res/srv26.log" 2>&1
  echo "srv26 rc $? $(date -u +%T)" >> "$res/chain.log"
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  taskset -c 16-31 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- campaign --engine gpu --dir "$res/c32" --budget 15m $known > "$res/c32.log" 2>&1
  echo "c32 rc $? $(date -u +%T)" >> "$res/chain.log"
}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  gpu0) bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/platform26.txt" 2>&1; gpu0 ;;
  gpu1) bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1; gpu1 ;;
  *) echo "usage: run.sh gpu0|gpu1" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
