#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-01, eleventh session. Default campaigns, no
# narrowing flags; corpus/gpu's signatures are NOT known (its bugs count when found again unaided).
#   run.sh chain26      vLLM 0.26.0 (/tmp/p26): a 4-minute warm-up campaign (w26) on the cold host, then the
#                       measured 10-minute default campaign (c26) on the warm host (issue #12's condition).
#   run.sh on32 BUDGET  vLLM 0.32.0 (/tmp/p32): replay corpus/gpu's sleep/wake cases and the CPU StillAsleep case
#                       (`replay --record` on copies in $HF_RES/replay32), then, at once, the default campaign c32
#                       on cores 0-11 and `fuzz --engine gpu --host server --workers 4` (srv32) on cores 12-15.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
known="--known corpus/found --known corpus/seeds --known corpus/families --known corpus/components"
hf() { local v=$1; shift; bash gpu/hf.sh /tmp/p$v /tmp/sha$v /tmp/site$v -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  chain26)
    hf 26 platform > "$res/platform26.txt" 2>&1
    bash gpu/timed-campaign.sh 26 w26 240 10 $known
    pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver
    bash gpu/timed-campaign.sh 26 c26 600 120 $known
    pkill -f hybridfuzz.engines.forkserver; sleep 2; pkill -9 -f hybridfuzz.engines.forkserver ;;
  on32)
    budget=${2:?budget seconds}
    hf 32 platform > "$res/platform32.txt" 2>&1
    mkdir -p "$res/replay32"
    for f in corpus/gpu/wake-up-*.yaml corpus/found/wake-up-all-tags-after-partial-wake-stays-asleep-cpu.yaml; do
      cp "$f" "$res/replay32/"
      hf 32 replay "$res/replay32/$(basename "$f")" --record > "$res/replay32/$(basename "$f" .yaml).txt" 2>&1 &
    done
    taskset -c 0-11 bash gpu/timed-campaign.sh 32 c32 "$budget" 60 $known &
    mkdir -p "$res/srv32"
    timeout -s INT -k 60 $((budget + 60)) taskset -c 12-15 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- fuzz --engine gpu \
        --host server --workers 4 --budget "${budget}s" --out "$res/srv32" --findings "$res/srv32/findings" $known \
        > "$res/srv32.log" 2>&1 &
    wait ;;
  *) echo "usage: run.sh chain26 | on32 BUDGET_S" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
