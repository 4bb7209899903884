#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-01, ninth session. Default campaigns, no
# narrowing flags; corpus/gpu's signatures are NOT known (so its bugs count when found again unaided).
#   run.sh chain26  vLLM 0.26.0 (shared bundle, 3 parts in /tmp/p26): a 4-minute warm-up campaign (w26: fills
#                   the host's Triton cache, its own figures are the cold-host ones), then the measured 10-minute
#                   campaign (c26) on the warm host, as issue #12's baseline was measured (Triton cache warm).
#   run.sh c32 BUDGET  vLLM 0.32.0 (shared bundle, 18 parts in /tmp/p32): one default campaign.
# Each campaign gets SIGINT GRACE s after its budget (the campaign then stops its workers in order and keeps
# what was found; open findings stay open) and SIGKILL 60 s later, and its leftover workers are killed, so a
# long shrink/replay tail cannot eat the session's device time (the warm-up gets no grace).
# Logs and campaign dirs in $HF_RES (default /tmp/res); gpu/pack-results.sh copies them back.
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
  # leftovers of a killed campaign (nothing else runs beside it): workers and their fork servers' engines
  pkill -f "campaign-worker --dir $res/$name"; pkill -f hybridfuzz.engines.forkserver; sleep 3
  pkill -9 -f "campaign-worker --dir $res/$name"; pkill -9 -f hybridfuzz.engines.forkserver
  bash gpu/hf.sh /tmp/p$v /tmp/sha$v /tmp/site$v -- campaign-status --dir "$res/$name" --json > "$res/$name-status.json" 2>&1
}
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
case "${1:-}" in
  chain26)
    bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/platform26.txt" 2>&1
    camp 26 w26 240 10
    camp 26 c26 600 120 ;;
  c32)
    bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- platform > "$res/platform32.txt" 2>&1
    camp 32 c32 "${2:?budget seconds}" 90 ;;
  o26)  # run by hand after chain26 (same command): a 5-minute campaign with OMP_NUM_THREADS=1 for every process
    timeout -s INT -k 30 310 env OMP_NUM_THREADS=1 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- campaign --engine gpu \
        --dir "$res/o26" --budget 300s $known > "$res/o26.log" 2>&1
    bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- campaign-status --dir "$res/o26" --json > "$res/o26-status.json" 2>&1 ;;
  *) echo "usage: run.sh chain26 | o26 | c32 BUDGET_S" >&2; exit 2 ;;
esac
echo "${1} done $(date -u +%T)" >> "$res/chain.log"
