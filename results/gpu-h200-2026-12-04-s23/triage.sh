#!/usr/bin/env bash
# Second machine of the twenty-third session (2026-12-04 UTC, one H200, vLLM 0.33.0). The first machine, running
# run.sh (the 20-minute acceptance campaign), was handed back idle 7 s into its campaign: a local command ran
# between two device calls for longer than the 30 s idle limit. 1373 device seconds were left, too few for 20 minutes
# after set-up, so this machine triages what the twenty-second session's campaign left open instead.
# Started detached (gpu/bg.sh) by the first device call; HF_PARTS_COUNT=38 installs while the parts arrive. Then all
# at once, each under `timeout`:
#   - replay --runs 2 of the six untriaged s22 signatures (results/gpu-h200-2026-12-04-s22/res/c33/findings/);
#   - the same with HYBRIDFUZZ_MEND=scale-fill for the per-token-head ones (27b03db4, 5c11aeb1, c5daf501) and for
#     corpus/gpu/granite-int8-per-token-head-first-request-differs-vllm-0.33.0.yaml (with and without the mend);
#   - shrink (8 minutes, 2 engines) of each of the six and of that corpus case.
set -u
cd "$(dirname "$0")/../.."
res=${HF_RES:-/tmp/res}; mkdir -p "$res/cases"
hf="bash gpu/hf.sh /tmp/p33 /tmp/sha33 /tmp/site33 --"
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
HF_PARTS_COUNT=38 $hf platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"
f=results/gpu-h200-2026-12-04-s22/res/c33/findings
for sig in dd27d43b 27b03db4 c7400c6a 5c11aeb1 05caf998 c5daf501; do cp $f/*_$sig.yaml "$res/cases/$sig.yaml"; done
cp corpus/gpu/granite-int8-per-token-head-first-request-differs-vllm-0.33.0.yaml "$res/cases/granite.yaml"
job() {  # job NAME MEND TIMEOUT_S hybridfuzz-args...: stdout to NAME.json, stderr to NAME.err, status to chain.log
  local name=$1 mend=$2 limit=$3; shift 3
  ( echo "$name start $(date -u +%T)" >> "$res/chain.log"
    if [ "$mend" = none ]; then timeout "$limit" $hf "$@" > "$res/$name.json" 2> "$res/$name.err"
    else HYBRIDFUZZ_MEND=$mend timeout "$limit" $hf "$@" > "$res/$name.json" 2> "$res/$name.err"; fi
    echo "$name rc $? $(date -u +%T)" >> "$res/chain.log" ) &
}
for sig in dd27d43b 27b03db4 c7400c6a 5c11aeb1 05caf998 c5daf501 granite; do
  job "rep-$sig" none 560 replay "$res/cases/$sig.yaml" --runs 2 --json
  job "shrink-$sig" none 560 shrink "$res/cases/$sig.yaml" --out "$res/cases/$sig.min.yaml" --budget 8m --workers 2 --json
done
for sig in 27b03db4 5c11aeb1 c5daf501 granite; do
  job "rep-$sig-mend" scale-fill 560 replay "$res/cases/$sig.yaml" --runs 2 --json
done
wait
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
