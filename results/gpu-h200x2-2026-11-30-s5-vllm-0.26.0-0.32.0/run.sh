#!/usr/bin/env bash
# The H200-pair session of 2026-11-30, fifth session: default campaigns with the `repeat` step, no narrowing flags.
# GPU 0 (cores 0-15):  vLLM 0.26.0: shrink the 5-step wake-up crash (issue #13: at most 4 steps), then
#                      `campaign --engine gpu --budget 7m` (#13: sleep/wake bugs beyond the corpus),
#                      then `fuzz --host server` (vllm serve, sleeps with requests in flight) for 2 minutes.
# GPU 1 (cores 16-31): vLLM 0.32.0 (gpu/make-bundle.sh 0.32.0, 26 parts): `campaign --engine gpu --budget 9m`
#                      (#12: cases/min, steps/min, start-up and step time; #13: sleep/wake bugs on 0.32.0).
# Parts in /tmp/p26 /tmp/p32, SHA256 in /tmp/sha26 /tmp/sha32. Logs in $HF_RES (default /tmp/res).
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
wake=corpus/gpu/wake-up-after-sleep-while-asleep-cuda-invalid-argument-vllm-0.26.0.yaml
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- shrink "$wake" --out "$res/wake-min.yaml" \
      --budget 3m --workers 8 --json > "$res/shrink26.log" 2>&1
  echo "shrink26 rc $? $(date -u +%T)" >> "$res/chain.log"
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- campaign --engine gpu --dir "$res/c26" --budget 7m > "$res/c26.log" 2>&1
  echo "c26 rc $? $(date -u +%T)" >> "$res/chain.log"
  taskset -c 0-15 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- fuzz --engine gpu --host server --workers 6 --budget 2m \
      --out "$res/srv26" --findings "$res/srv26/findings" > "$res/srv26.log" 2>&1
  echo "srv26 rc $? $(date -u +%T)" >> "$res/chain.log"
}
gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  taskset -c 16-31 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- campaign --engine gpu --dir "$res/c32" --budget 9m > "$res/c32.log" 2>&1
  echo "c32 rc $? $(date -u +%T)" >> "$res/chain.log"
}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  gpu0) bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/platform26.txt" 2>&1; gpu0 ;;
  gpu1) bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1; gpu1 ;;
  *) echo "usage: run.sh gpu0|gpu1" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
