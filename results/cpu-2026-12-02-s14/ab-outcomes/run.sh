#!/bin/bash
args="fuzz --engine cpu --budget 4m --seed 4 --cases-per-engine 12 --max-steps 6 --workers 1 --kv-dtypes auto --shrink background"
cd /work/before && /tmp/venv-before/bin/hybridfuzz $args --out /tmp/ab/before --findings /tmp/ab/before-found > /tmp/ab/before.log 2>&1
cd /work/main && hybridfuzz $args --out /tmp/ab/after --findings /tmp/ab/after-found > /tmp/ab/after.log 2>&1
echo done > /tmp/ab/done
