#!/usr/bin/env bash
# One bounded campaign on an offline GPU host, as the H200 sessions run them (results/gpu-h200-*/run.sh):
#
#   gpu/timed-campaign.sh TAG NAME BUDGET_S GRACE_S [campaign args...]
#
# TAG picks the bundle the session copied to /tmp/pTAG, /tmp/shaTAG and installs in /tmp/siteTAG (e.g. 26, 32).
# Runs `campaign --engine gpu --dir $HF_RES/NAME --budget BUDGET_S`, SIGINT GRACE_S after its budget and SIGKILL
# 60 s later; kills leftover workers; writes `campaign-status --json` to $HF_RES/NAME-status.json and start/end
# lines to $HF_RES/chain.log (HF_RES defaults to /tmp/res). Exits with the campaign's status.
set -u
tag=${1:?usage: timed-campaign.sh TAG NAME BUDGET_S GRACE_S [campaign args...]}
name=${2:?}; budget=${3:?}; grace=${4:?}; shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
echo "$name start $(date -u +%T)" >> "$res/chain.log"
timeout -s INT -k 60 $((budget + grace)) bash "$here/gpu/hf.sh" "/tmp/p$tag" "/tmp/sha$tag" "/tmp/site$tag" -- campaign \
    --engine gpu --dir "$res/$name" --budget "${budget}s" "$@" > "$res/$name.log" 2>&1
rc=$?
echo "$name rc $rc $(date -u +%T)" >> "$res/chain.log"
pkill -f "campaign-worker --dir $res/$name"; sleep 3; pkill -9 -f "campaign-worker --dir $res/$name"
bash "$here/gpu/hf.sh" "/tmp/p$tag" "/tmp/sha$tag" "/tmp/site$tag" -- campaign-status --dir "$res/$name" --json > "$res/$name-status.json" 2>&1
exit "$rc"
