#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-01, fourteenth session (the twelfth session's script, unchanged). Default campaigns, no narrowing
# flags, on a host whose Triton and FlashInfer caches were restored first (gpu/caches.sh restore, the eleventh
# session's caches) instead of a warm-up campaign. corpus/gpu's signatures are NOT known (its bugs count when found
# again unaided).
#   run.sh c26 BUDGET   vLLM 0.26.0 (/tmp/p26): the default campaign c26.
#   run.sh c32 BUDGET   vLLM 0.32.0 (/tmp/p32): the default campaign c32, with corpus/found's two CPU sleep/wake
#                       cases (StillAsleep, reload_weights) left out of the known set, so that they count if met.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
known="--known corpus/seeds --known corpus/families --known corpus/components"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
budget=${2:?budget seconds}
case "${1:-}" in
  c26)
    bash gpu/timed-campaign.sh 26 c26 "$budget" 60 $known --known corpus/found ;;
  c32)
    mkdir -p "$res/known32"
    cp corpus/found/*.yaml "$res/known32/"
    rm "$res/known32/wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml" "$res/known32/reload-weights-changes-outputs-cpu.yaml"
    bash gpu/timed-campaign.sh 32 c32 "$budget" 60 $known --known "$res/known32" ;;
  *) echo "usage: run.sh c26|c32 BUDGET_S" >&2; exit 2 ;;
esac
rc=$?
pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
echo "${1} done rc=$rc $(date -u +%T)" >> "$res/chain.log"
