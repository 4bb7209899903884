#!/usr/bin/env bash
# CPU A/B of 8493499 (head: a warm engine goes on after a level-2 sleep without sleep mode, reloads after one
# with it, and finishes a sleep whose memory check was disturbed) against ead8c81 (base: every level-2 case ended
# its engine). base ran from a worktree of ead8c81 with its own venv (--system-site-packages, pip install
# --no-deps -e). Both arms: the same seeds, one after the other on this 2-core machine.
set -u
for seed in 3 4; do
for arm in base head; do
  if [ $arm = base ]; then bin=/work/wt-base/.venv/bin/hybridfuzz; else bin=hybridfuzz; fi
  d=/tmp/ab/$arm-s$seed; rm -rf $d
  (cd /tmp && $bin fuzz --engine cpu --budget 4m --seed $seed --cases-per-engine 12 --max-steps 6 --workers 1 --kv-dtypes auto --shrink background --out $d --findings $d/findings > /tmp/ab/$arm-s$seed.log 2>&1)
  echo "$arm s$seed done $(date -u +%T)" >> /tmp/ab/chain.log
done; done
