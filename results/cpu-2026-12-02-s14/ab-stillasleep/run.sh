#!/bin/bash
# StillAsleep left unknown (--known corpus/seeds), 12-step scripts: how often a found sleep/wake stop is met again
args="fuzz --engine cpu --budget 4m --seed 3 --cases-per-engine 12 --max-steps 12 --workers 1 --kv-dtypes auto --shrink background --known corpus/seeds"
cd /work/before && /tmp/venv-before/bin/hybridfuzz $args --out /tmp/ab2/before --findings /tmp/ab2/before-found > /tmp/ab2/before.log 2>&1
cd /tmp/ab2-after-src && /tmp/venv-after/bin/hybridfuzz $args --out /tmp/ab2/after --findings /tmp/ab2/after-found > /tmp/ab2/after.log 2>&1
echo done > /tmp/ab2/done
