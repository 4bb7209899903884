#!/usr/bin/env bash
# One bounded campaign on an offline GPU host, as the H200 and H100 run plans of results/ ran them:
#
#   gpu/timed-campaign.sh TAG NAME BUDGET_S GRACE_S [campaign args...]
#
# TAG picks the bundle copied to /tmp/pTAG, /tmp/shaTAG and installs in /tmp/siteTAG (e.g. 26, 32).
# Runs `campaign --engine gpu --dir $HF_RES/NAME --budget BUDGET_S`, SIGINT GRACE_S after its budget and SIGKILL
# 60 s later (GRACE_S 180 leaves room for the wind-down: background shrinks stop 60 s past the budget, and every
# finding still queued is replayed once on a fresh engine; with 60 both campaigns of 2026-12-03 were killed before
# their final summary, their workers replaying until about 140 s past the budget); kills leftover workers; writes
# `campaign-status --json` to $HF_RES/NAME-status.json and start/end lines to $HF_RES/chain.log (HF_RES defaults
# to /tmp/res). Exits with the campaign's status.
#
# HF_PYSPY=PATH (a py-spy binary) also profiles every process of the campaign, on-CPU samples at $HF_PYSPY_RATE Hz
# (default 5: at 10 Hz over about 100 processes py-spy fell 231 s behind, 2026-12-03), into $HF_RES/NAME-prof.txt.gz,
# summarized (gpu/cpu_profile.py) in NAME-prof-summary.txt and folded small in NAME-prof-folded.txt.gz.
set -u
tag=${1:?usage: timed-campaign.sh TAG NAME BUDGET_S GRACE_S [campaign args...]}
name=${2:?}; budget=${3:?}; grace=${4:?}; shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
echo "$name start $(date -u +%T)" >> "$res/chain.log"
timeout -s INT -k 60 $((budget + grace)) bash "$here/gpu/hf.sh" "/tmp/p$tag" "/tmp/sha$tag" "/tmp/site$tag" -- campaign \
    --engine gpu --dir "$res/$name" --budget "${budget}s" "$@" > "$res/$name.log" 2>&1 &
runner=$!
spy=""
if [ -n "${HF_PYSPY:-}" ]; then
  # The campaign's Python is timeout's child once hf.sh has exec'd it (same pid). Found by reading its command line
  # with builtins every 20 ms for up to 20 s: a pgrep every 0.2 s could miss a campaign that refuses in 0.3 s (CPU).
  camp=""; kid=""
  for _ in $(seq 1000); do
    [ -n "$kid" ] || kid=$(pgrep -P "$runner" | head -1)
    if [ -n "$kid" ] && mapfile -d '' argv < "/proc/$kid/cmdline" 2>/dev/null; then
      case "${argv[*]}" in *"hybridfuzz.cli campaign"*) camp=$kid; break ;; esac
    fi
    kill -0 "$runner" 2>/dev/null || break
    sleep 0.02
  done
  if [ -n "$camp" ]; then
    "$HF_PYSPY" record --pid "$camp" --subprocesses --nonblocking --rate "${HF_PYSPY_RATE:-5}" --format raw \
        -o "$res/$name-prof.txt" > "$res/$name-pyspy.log" 2>&1 &
    spy=$!
    echo "$name py-spy on pid $camp $(date -u +%T)" >> "$res/chain.log"
  fi
fi
wait "$runner"
rc=$?
echo "$name rc $rc $(date -u +%T)" >> "$res/chain.log"
if [ -n "$spy" ]; then  # it writes when the campaign is gone; it may lag behind its samples
  for _ in $(seq 120); do kill -0 "$spy" 2>/dev/null || break; sleep 1; done
  kill -INT "$spy" 2>/dev/null; wait "$spy" 2>/dev/null
  python3 "$here/gpu/cpu_profile.py" "$res/$name-prof.txt" --top 40 --folded "$res/$name-prof-folded.txt.gz" \
      > "$res/$name-prof-summary.txt" 2>&1
  gzip -f "$res/$name-prof.txt"
fi
pkill -f "campaign-worker --dir $res/$name"; sleep 3; pkill -9 -f "campaign-worker --dir $res/$name"
bash "$here/gpu/hf.sh" "/tmp/p$tag" "/tmp/sha$tag" "/tmp/site$tag" -- campaign-status --dir "$res/$name" --json > "$res/$name-status.json" 2>&1
exit "$rc"
