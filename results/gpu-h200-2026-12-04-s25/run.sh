#!/usr/bin/env bash
# One H200 (device tool kind nvidia-h200, 16 cores), 2026-12-04 UTC, twenty-fifth session: what issue #12's third
# acceptance item still lacked after s24's 20-minute campaign on vLLM 0.33.0 (results/gpu-h200-2026-12-04-s24/).
# Started detached (gpu/bg.sh) by the FIRST device call, from a copy of the checkout in /tmp/repo, while the other 37
# calls bring the bundle's parts (gpu/make-bundle.sh 0.33.0 .gpu/s33). After the install, all at once:
#   1. replay (--runs 2, fresh engines) the three real findings found in s24's last 17 s and never replayed;
#   2. shrink the eight real findings the campaign's background shrinker never reached (SHRINK_BUDGET each, 3 engines);
#   3. the one-token-prompt class (A) under HYBRIDFUZZ_MEND=prefill-eager: does running prefills eagerly mend it?
#   4. controls of the two granite fp8-under-graphs findings (D): eager, every layer attention, the model's own SSM
#      cache dtype; these two wait EXTRAS_AFTER seconds, so that the cold host compiles for 1 and 2 first.
# Every job writes JSON to $res/late or $res/shrink; gpu/pack-results.sh brings those folders back.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
res=${HF_RES:-/tmp/res}; mkdir -p "$res/late" "$res/shrink"
s24=$here/results/gpu-h200-2026-12-04-s24/res/c33/findings
cases=$here/results/gpu-h200-2026-12-04-s25/cases
budget=${SHRINK_BUDGET:-900}
hf() { bash "$here/gpu/hf.sh" /tmp/p33 /tmp/sha33 /tmp/site33 -- "$@"; }
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$res/gpus.csv" 2>&1
(while sleep 10; do echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) gpu_util,mem_mb $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits | head -1)"; done) > "$res/sampler.txt" 2>&1 &
sampler=$!
echo "install start $(date -u +%T)" >> "$res/chain.log"
HF_PARTS_COUNT=38 hf platform > "$res/platform33.txt" 2>&1
echo "install rc $? $(date -u +%T)" >> "$res/chain.log"

jobs=()
replay_job() {  # replay_job NAME CASE [ENV=VALUE...] ARGS: one replay job into $res/late/NAME.{json,err}
  local name=$1 case=$2; shift 2
  (env "$@" bash "$here/gpu/hf.sh" /tmp/p33 /tmp/sha33 /tmp/site33 -- replay "$case" --json ${RUNS:+--runs $RUNS} \
     > "$res/late/$name.json" 2> "$res/late/$name.err"; echo "$name rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
}
# 1. the three never replayed, on copies so that --record writes beside them
for f in self_consistency_first-request-differs_ef8dca8d self_consistency_repeat-differs_6e91af78 self_consistency_wake-differs_11c48cea; do
  cp "$s24/$f.yaml" "$res/late/$f.yaml"
  (hf replay "$res/late/$f.yaml" --runs 2 --record --json > "$res/late/rep-${f##*_}.json" 2> "$res/late/rep-${f##*_}.err"
   echo "rep-${f##*_} rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
done
# 2. the eight real findings not shrunk, each from s24's finding file
for f in self_consistency_first-request-differs_ffb181bb self_consistency_reload-differs_fd0d6889 \
         self_consistency_first-request-differs_ef8dca8d health_crash_SIGABRT_e15d36c9 \
         self_consistency_repeat-differs_6e91af78 self_consistency_wake-differs_11c48cea \
         health_error_AssertionError_238c0dfc reference_beyond-noise_4e783eaf; do
  sig=${f##*_}
  cp "$s24/$f.yaml" "$res/shrink/$sig.yaml"
  (hf shrink "$res/shrink/$sig.yaml" --budget "${budget}s" --workers 3 --json > "$res/shrink/$sig.json" 2> "$res/shrink/$sig.log"
   echo "shrink-$sig rc $? $(date -u +%T)" >> "$res/chain.log") &
  jobs+=($!)
done
# 3 and 4 wait until the first engines have compiled Triton's kernels (a cold host's first start-up took 189 s in s24)
sleep "${EXTRAS_AFTER:-240}"
# 3. class A under the candidate mend (the campaign replayed each of them without it: same signature)
for c in "$here"/corpus/gpu/falcon-h1-auto-kv-graphs-one-token-prompts-differ-vllm-0.33.0.yaml \
         "$here"/corpus/gpu/jamba-bf16-kv-graphs-one-token-prompt-after-reload-vllm-0.33.0.yaml \
         "$here"/corpus/gpu/lfm2-conv-only-graphs-one-token-prompt-after-wake-vllm-0.33.0.yaml \
         "$here"/corpus/gpu/falcon-h1-fp8-graphs-one-token-prompt-reference-vllm-0.33.0.yaml \
         "$s24"/self_consistency_first-request-differs_ef8dca8d.yaml; do
  n=$(basename "$c" .yaml); RUNS=2 replay_job "mend-${n%-vllm-0.33.0}" "$c" HYBRIDFUZZ_MEND=prefill-eager
done
# 4. the granite controls
for c in "$cases"/granite-*.yaml; do RUNS=2 replay_job "ctl-$(basename "$c" .yaml)" "$c"; done
wait "${jobs[@]}"
kill $sampler
echo "all done $(date -u +%T)" >> "$res/chain.log"
