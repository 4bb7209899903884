#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-04 UTC, twenty-second session; started detached with
# gpu/bg.sh from a copy of the checkout in /tmp/repo. vLLM 0.33.0 (bundle parts in /tmp/p33, gpu/make-bundle.sh
# 0.33.0, re-split into 40 MiB parts: the working tree that travels with each call grew past 19 MiB); cold kernel
# caches, no warm-up. The first machine was handed back idle after 9 of 42 parts (188 s of device time lost), so
# a 20-minute campaign no longer fits this session. Instead, at once:
#   1. install the bundle (`hf.sh ... platform`);
#   2. a 12-minute campaign with defaults only, the first with the new shrink order and block shrinking:
#        hybridfuzz campaign --engine gpu --dir $res/c33 --budget 720s   (SIGINT 60 s after its budget)
#   3. beside it, the decisive test of the per-token-head class of results/gpu-h200-2026-12-03-s21/: its findings
#      01917420, 1e34f3e1 and b32759bc replayed twice each, without and with HYBRIDFUZZ_MEND=scale-fill
#      (TritonAttentionImpl._ensure_scale_caches without its fill_(1.0), seed 1's upstream fix);
#   4. then `shrink` of 01917420 (6 min, 4 engines) and its minimal case replayed without and with the mend.
# A sampler writes the host's load, CPU use and the GPU's use every 10 s to $res/sampler.txt.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res/s21"
hf="bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 --"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) cpu $(head -1 /proc/stat | cut -d' ' -f3-6) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
$hf platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
bash gpu/timed-campaign.sh 33 c33 720 60 &
camp=$!
f=results/gpu-h200-2026-12-03-s21/res/c33/findings
for sig in 01917420 1e34f3e1 b32759bc; do
  cp $f/*_$sig.yaml "$res/s21/$sig.yaml"
  for mend in none scale-fill; do
    echo "replay $sig mend=$mend start $(date -u +%T)" >> "$res/chain.log"
    if [ $mend = none ]; then timeout 500 $hf replay "$res/s21/$sig.yaml" --runs 2 --json > "$res/rep-$sig-$mend.json" 2> "$res/rep-$sig-$mend.err"
    else HYBRIDFUZZ_MEND=$mend timeout 500 $hf replay "$res/s21/$sig.yaml" --runs 2 --json > "$res/rep-$sig-$mend.json" 2> "$res/rep-$sig-$mend.err"; fi
    echo "replay $sig mend=$mend rc $? $(date -u +%T)" >> "$res/chain.log"
  done
done
echo "shrink 01917420 start $(date -u +%T)" >> "$res/chain.log"
timeout 420 $hf shrink "$res/s21/01917420.yaml" --out "$res/s21/01917420.min.yaml" --budget 6m --workers 4 --json \
    > "$res/shrink-01917420.json" 2> "$res/shrink-01917420.err"
echo "shrink 01917420 rc $? $(date -u +%T)" >> "$res/chain.log"
if [ -f "$res/s21/01917420.min.yaml" ]; then
  timeout 300 $hf replay "$res/s21/01917420.min.yaml" --runs 2 --json > "$res/rep-min-none.json" 2> "$res/rep-min-none.err"
  echo "replay min mend=none rc $? $(date -u +%T)" >> "$res/chain.log"
  HYBRIDFUZZ_MEND=scale-fill timeout 300 $hf replay "$res/s21/01917420.min.yaml" --runs 2 --json > "$res/rep-min-mend.json" 2> "$res/rep-min-mend.err"
  echo "replay min mend=scale-fill rc $? $(date -u +%T)" >> "$res/chain.log"
fi
wait $camp
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
