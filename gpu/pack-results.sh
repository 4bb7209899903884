#!/usr/bin/env bash
# Copy what a GPU run found into OUT, small enough to bring back: each campaign's summary,
# campaign.json, findings (YAML) and their states, learnt refusals, per-worker summaries and events,
# the tail of each job log (`hybridfuzz campaign-status --dir` works on the copy), and from any other
# folder (loose replays and shrinks) its YAML, JSON and log tails. Run it often while detached jobs run
# (e.g. at the end of every remote command that watches them): results come back even if the host is lost later.
#
#   gpu/pack-results.sh RES_DIR OUT_DIR
set -uo pipefail
res=${1:?usage: pack-results.sh RES_DIR OUT_DIR}; out=${2:?usage: pack-results.sh RES_DIR OUT_DIR}
mkdir -p "$out"
log_tail() {  # log_tail LOG LINES INTO: the log's last LINES lines without vLLM's INFO and warning chatter, into INTO/
  [ -f "$1" ] && grep -av " INFO \|WARNING\|^\[transformers\]\|^Triton" "$1" | tail -"$2" > "$3/$(basename "$1")"
}
for log in "$res"/*.log; do log_tail "$log" 200 "$out"; done
cp "$res"/*.rc "$res"/*.json "$res"/*.txt "$res"/*-prof-folded.txt.gz "$out"/ 2>/dev/null
for d in "$res"/*/; do
  if [ ! -f "$d/campaign.json" ] && [ ! -f "$d/summary.json" ]; then
    # a folder of loose jobs (a run plan's replays and shrinks, gpu/plan.sh): their cases and JSON whole, their logs' tails
    n=$(basename "$d"); mkdir -p "$out/$n"
    cp "$d"/*.yaml "$d"/*.json "$out/$n"/ 2>/dev/null
    for log in "$d"/*.log "$d"/*.err; do log_tail "$log" 300 "$out/$n"; done
    continue
  fi
  n=$(basename "$d"); mkdir -p "$out/$n"
  cp "$d"/summary.json "$d"/campaign.json "$out/$n"/ 2>/dev/null
  for sub in findings state refusals; do [ -d "$d/$sub" ] && cp -r "$d/$sub" "$out/$n/"; done
  for w in "$d"/workers/*/; do
    [ -d "$w" ] || continue; wn=$(basename "$w"); mkdir -p "$out/$n/workers/$wn"
    cp "$w"/summary.json "$w"/events.jsonl "$out/$n/workers/$wn"/ 2>/dev/null
    grep -v " INFO \|WARNING" "$w/worker.log" 2>/dev/null | tail -60 > "$out/$n/workers/$wn/worker.log.tail"
    # what the background shrinker did: which finding, what it kept, how it ended (the tail above misses it)
    grep -a "shrink\|kept:\|replay" "$w/worker.log" 2>/dev/null | grep -v " INFO " | tail -300 > "$out/$n/workers/$wn/shrinks.txt"
  done
done
du -sh "$out"
