#!/usr/bin/env bash
# The fourteenth session's device chain (one H200), started detached with gpu/bg.sh so it outlives the calls:
#   chain.sh c26   install the 0.26.0 bundle (/tmp/p26), then run.sh c26 600
#   chain.sh c32   wait for c26 and the 0.32.0 install (inst32.rc), then run.sh c32 600, then the 17f5762e
#                  reproducer on 0.26.0 and 0.32.0 (results/gpu-h200-2026-12-01-s12/export-17f5762e/repro.py)
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
case "${1:-}" in
  c26)
    bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- platform > "$res/inst26.log" 2>&1
    echo "inst26 done $(date -u +%T)" >> "$res/chain.log"
    bash results/gpu-h200-2026-12-01-s14/run.sh c26 600 ;;
  c32)
    while [ ! -f "$res/run26.rc" ] || [ ! -f "$res/inst32.rc" ]; do sleep 5; done
    bash results/gpu-h200-2026-12-01-s14/run.sh c32 600
    for v in 26 32; do
      echo "repro$v start $(date -u +%T)" >> "$res/chain.log"
      timeout 240 bash gpu/hf.sh /tmp/p$v /tmp/sha$v /tmp/site$v -- python3 \
        results/gpu-h200-2026-12-01-s12/export-17f5762e/repro.py > "$res/repro$v.log" 2>&1
      echo "repro$v rc $? $(date -u +%T)" >> "$res/chain.log"
    done ;;
  *) echo "usage: chain.sh c26|c32" >&2; exit 2 ;;
esac
