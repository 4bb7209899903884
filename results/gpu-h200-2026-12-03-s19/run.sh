#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-03, nineteenth session; started detached with gpu/bg.sh
# from a copy of the checkout in /tmp/repo. vLLM 0.32.0 (bundle parts in /tmp/p32, gpu/make-bundle.sh 0.32.0);
# py-spy 0.4.2's binary in /tmp/py-spy (its wheel's only file). Cold kernel caches (none carried). In order:
#   1. a warm-up campaign (its own directory, seed 1, $WARM s): fills Triton's kernel and autotuning caches;
#   2. the measured campaign with defaults only (seed 0, no narrowing flags; it knows ./corpus, as in a checkout):
#        hybridfuzz campaign --engine gpu --dir $res/c32 --budget 600s
#      the first with engine CPU seconds in its events and summary (6447359) and TRITON_CACHE_AUTOTUNING=1 (8456021);
#      py-spy samples all its processes meanwhile (record --subprocesses --nonblocking, 10 Hz, on-CPU samples only:
#      where the CPU goes; gpu/cpu_profile.py summarizes). Nonblocking: it reads the processes' memory without
#      stopping them; about 60 processes at 10 Hz is a small part of one core of sixteen;
#   3. the two deciding replays of the seventeenth session's 6fba12a6 (results/gpu-h200-2026-12-02-s17/).
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res"
warm=${WARM:-300}
hf() { bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
hf platform > "$res/platform32.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
caches() { echo "caches $1: triton $(du -sm ~/.triton/cache 2>/dev/null | cut -f1) MB, vllm $(du -sm ~/.cache/vllm 2>/dev/null | cut -f1) MB $(date -u +%T)" >> "$res/chain.log"; }
sweep() { pkill -f "hybridfuzz.engines.forkserve[r]"; sleep 2; pkill -9 -f "hybridfuzz.engines.forkserve[r]"; }
caches before-warm
bash gpu/timed-campaign.sh 32 warm32 "$warm" 30 --seed 1
sweep; caches after-warm
bash gpu/timed-campaign.sh 32 c32 600 60 &
tc=$!
camp=""
for _ in $(seq 60); do camp=$(pgrep -f "hybridfuzz.cli campaign --engine gpu --dir $res/c32 " | head -1); [ -n "$camp" ] && break; sleep 0.5; done
if [ -n "$camp" ] && [ -x /tmp/py-spy ]; then
  timeout -s INT 720 /tmp/py-spy record --pid "$camp" --subprocesses --nonblocking --rate 10 --format raw \
      -o "$res/prof-c32.txt" > "$res/pyspy.log" 2>&1 &
  echo "py-spy on pid $camp $(date -u +%T)" >> "$res/chain.log"
fi
wait $tc
sleep 5
python3 gpu/cpu_profile.py "$res/prof-c32.txt" --top 40 > "$res/prof-c32-summary.txt" 2>&1
gzip -kf "$res/prof-c32.txt"
sweep; caches after-c32
for r in r1 r2-eager; do
  echo "replay $r start $(date -u +%T)" >> "$res/chain.log"
  timeout 240 bash gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- replay "results/gpu-h200-2026-12-02-s17/replay-6fba12a6-$r.yaml" \
      --runs 1 --timeout 200 --json > "$res/replay-6fba12a6-$r.json" 2> "$res/replay-6fba12a6-$r.err"
  echo "replay $r rc $? $(date -u +%T)" >> "$res/chain.log"
  sweep
done
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
