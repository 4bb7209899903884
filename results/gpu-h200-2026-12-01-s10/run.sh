#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-01, tenth session. Default campaigns, no
# narrowing flags; corpus/gpu's signatures are NOT known (its bugs count when found again unaided).
#   run.sh chain26        vLLM 0.26.0 (shared bundle, 3 parts in /tmp/p26): a 4-minute warm-up campaign (w26,
#                         fills the cold host's Triton cache), then the measured 10-minute campaign (c26), alone
#                         on the warm host, as issue #12's baseline was measured.
#   run.sh c32 BUDGET     vLLM 0.32.0 (shared bundle, 20 parts in /tmp/p32): one default campaign.
#   run.sh leads BUDGET   vLLM 0.26.0: `shrink` the ninth session's two open leads (results/gpu-h200-2026-12-01-s9/
#                         c26/findings/reference_beyond-noise_*.yaml), both at once, 3 engines each.
# Each campaign gets SIGINT GRACE s after its budget and SIGKILL 60 s later; its leftover workers are killed.
# Logs and campaign dirs in $HF_RES (default /tmp/res).
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
known="--known corpus/found --known corpus/seeds --known corpus/families --known corpus/components"
camp() {  # camp VERSION_TAG NAME BUDGET_S GRACE_S
  local v=$1 name=$2 budget=$3 grace=$4
  echo "$name start $(date -u +%T)" >> "$res/chain.log"
  timeout -s INT -k 60 $((budget + grace)) bash gpu/hf.sh /tmp/p$v /tmp/sha$v /tmp/site$v -- campaign --engine gpu \
      --dir "$res/$name" --budget "${budget}s" $known > "$res/$name.log" 2>&1
  echo "$name rc $? $(date -u +%T)" >> "$res/chain.log"
  pkill -f "campaign-worker --dir $res/$name"; sleep 3; pkill -9 -f "campaign-worker --dir $res/$name"
  bash gpu/hf.sh /tmp/p$v /tmp/sha$v /tmp/site$v -- campaign-status --dir "$res/$name" --json > "$res/$name-status.json" 2>&1
}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  chain26)
    bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/platform26.txt" 2>&1
    camp 26 w26 240 10
    pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
    camp 26 c26 600 120
    pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
    du -sh ~/.triton/cache ~/.cache/vllm ~/.cache/flashinfer /tmp/torchinductor_* > "$res/cache-sizes.txt" 2>&1 ;;
  c32)
    bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1
    camp 32 c32 "${2:?budget seconds}" 90 ;;
  leads)
    mkdir -p "$res/leads"
    for f in results/gpu-h200-2026-12-01-s9/c26/findings/reference_beyond-noise_*.yaml; do
      n=$(basename "$f" .yaml)
      timeout -s INT -k 30 "${2:?budget seconds}" bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- shrink "$f" \
          --out "$res/leads/$n.min.yaml" --workers 3 --budget "$(( ${2} - 20 ))s" > "$res/leads/$n.log" 2>&1 &
    done
    wait ;;
  *) echo "usage: run.sh chain26 | c32 BUDGET_S | leads BUDGET_S" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
