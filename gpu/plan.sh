#!/usr/bin/env bash
# Helpers for a run plan on a GPU host (a script of shrinks, replays and campaigns, kept under the ignored runs/
# folder), sourced by it: the GPU sampler, the bundle's install, and shrink and replay jobs on copies of corpus cases.
#
#   source gpu/plan.sh 33           # the bundle's tag: parts in /tmp/pNN, SHA256 in /tmp/shaNN, site /tmp/siteNN
#   plan_begin 38                   # = plan_sampler; plan_install 38
#   shrink_job SIG WORKERS BUDGET CORPUS_NAME [SHRINK ARGS...]; replay_job SIG RUNS CORPUS_NAME; wait "${jobs[@]}"
#   shrink_file / replay_file: the same for any case file (PATH for CORPUS_NAME); replay_file SIG RUNS PATH [NAME=VALUE...]
#     runs under those variables (HYBRIDFUZZ_MEND=... for a triage's decisive replay)
#   shrink_alone SIG CORPUS_NAME [SHRINK ARGS...]   # a GPU-fault case, last, with the GPU to itself until the deadline
#   plan_gpu_lost && echo lost; plan_end
# Results go under $res (HF_RES, default /tmp/res), the log of what ran to $res/chain.log. The plan's deadline is
# PLAN_LEFT seconds (default 1530) from when this file is sourced: how long the host is available for, less the time
# the bundle's parts take to arrive. The older names lease_begin, lease_sampler, lease_install, lease_gpu_lost,
# lease_end and LEASE_LEFT still work.
tag=${1:?usage: source gpu/plan.sh TAG}
here=${here:-$PWD}
deadline=$(($(date +%s) + ${PLAN_LEFT:-${LEASE_LEFT:-1530}}))
res=${HF_RES:-/tmp/res}; mkdir -p "$res/shrink" "$res/replay"
jobs=()

hf() { bash "$here/gpu/hf.sh" "/tmp/p$tag" "/tmp/sha$tag" "/tmp/site$tag" -- "$@"; }

say() { echo "$* $(date -u +%T)" >> "$res/chain.log"; }

plan_sampler() {
  # Every 10 s the GPU's state. A line saying the GPU is gone or needs a reset (an H100 after a GPU-fault case's shrink,
  # 2026-12-05, vLLM 0.33.0) saves nvidia-smi -q and the kernel's NVRM lines, interrupts the shrinks (each writes what it
  # kept) and marks the chain "GPU LOST": a lost GPU is not ours to reset.
  nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv > "$res/gpus.csv" 2>&1
  (while sleep 10; do
     line=$(nvidia-smi --query-gpu=utilization.gpu,memory.used,pstate,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader,nounits 2>&1 | head -1)
     echo "$(date -u +%T) load1 $(cut -d' ' -f1 /proc/loadavg) gpu $line"
     case $line in *[Ee]rror*|*[Ff]ail*|*"No devices"*|*[Rr]eset*)
       say "GPU LOST: $line"
       nvidia-smi -q > "$res/gpu-fault.txt" 2>&1
       dmesg 2>&1 | grep -i "nvrm" | grep -v nvAssertFailedNoLog > "$res/dmesg-nvrm.txt"
       pkill -INT -f "[p]ython.*shrink $res/shrink"; break;;
     esac
   done) > "$res/sampler.txt" 2>&1 &
  sampler=$!
}

plan_begin() { plan_sampler; plan_install "$1"; }  # plan_begin PARTS

plan_install() {  # plan_install PARTS: install the bundle once all its parts have come (hf.sh waits for them)
  say "install start"
  HF_PARTS_COUNT=$1 hf platform > "$res/platform$tag.txt" 2>&1
  say "install rc $?"
}

corpus_case() { ls "$here"/corpus/gpu/"$1"-vllm-*.yaml | tail -1; }  # corpus_case NAME: corpus/gpu/NAME-vllm-*.yaml

shrink_job() {  # shrink_job SIG WORKERS BUDGET CORPUS_NAME [SHRINK ARGS...]: shrink a copy of corpus/gpu/NAME-vllm-*.yaml
  local sig=$1 workers=$2 budget=$3 src; src=$(corpus_case "$4"); shift 4
  shrink_file "$sig" "$workers" "$budget" "$src" "$@"
}

shrink_file() {  # shrink_file SIG WORKERS BUDGET PATH [SHRINK ARGS...]: shrink a copy of the case file PATH
  local sig=$1 workers=$2 budget=$3 src=$4; shift 4
  cp "$src" "$res/shrink/$sig.yaml"
  say "shrink-$sig start budget ${budget}s workers $workers $*"
  (hf shrink "$res/shrink/$sig.yaml" --budget "${budget}s" --workers "$workers" --json "$@" > "$res/shrink/$sig.json" 2> "$res/shrink/$sig.log"
   say "shrink-$sig rc $?") &
  jobs+=($!)
}

replay_job() {  # replay_job SIG RUNS CORPUS_NAME: RUNS fresh runs of a copy of the corpus case, recorded into the copy
  replay_file "$1" "$2" "$(corpus_case "$3")"
}

replay_file() {  # replay_file SIG RUNS PATH [NAME=VALUE...]: RUNS fresh runs of a copy of the case file PATH, recorded
  # into the copy, with those variables in the environment (a mend: HYBRIDFUZZ_MEND=scale-fill)
  local sig=$1 runs=$2 src=$3; shift 3
  cp "$src" "$res/replay/$sig.yaml"
  say "replay-$sig start${*:+ $*}"
  (for kv in "$@"; do export "$kv"; done
   hf replay "$res/replay/$sig.yaml" --runs "$runs" --record --json > "$res/replay/$sig.json" 2> "$res/replay/$sig.log"
   say "replay-$sig rc $?") &
  jobs+=($!)
}

shrink_alone() {  # shrink_alone SIG CORPUS_NAME [SHRINK ARGS...]: one worker until the deadline, less 150 s for the
  # confirmation, once the jobs before it are done; skipped if the GPU is lost or less than 180 s are left.
  # share=N shrink_alone ...: N % of that time, leaving the rest to a later shrink_alone (a case that does not
  # reproduce would otherwise take all of it from the next)
  wait "${jobs[@]}"; jobs=()
  local left=$(( (deadline - $(date +%s) - 150) * ${share:-100} / 100 ))
  if plan_gpu_lost; then
    say "shrink-$1 skipped: the GPU is lost"
  elif [ "$left" -lt 180 ]; then
    say "shrink-$1 skipped: ${left}s left"
  else
    local sig=$1 name=$2; shift 2
    shrink_job "$sig" 1 "$left" "$name" "$@"
    wait "${jobs[@]}"; jobs=()
  fi
}

plan_gpu_lost() { grep -q "GPU LOST" "$res/chain.log" 2>/dev/null; }

plan_end() { kill "$sampler" 2>/dev/null; say "all done"; }

# the older names
lease_sampler() { plan_sampler "$@"; }
lease_begin() { plan_begin "$@"; }
lease_install() { plan_install "$@"; }
lease_gpu_lost() { plan_gpu_lost "$@"; }
lease_end() { plan_end "$@"; }
