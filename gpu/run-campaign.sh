#!/usr/bin/env bash
# Prepare and run a bounded hybridfuzz campaign on an offline GPU host.
#
#   gpu/run-campaign.sh PARTS_DIR SHA256_FILE BUDGET OUT_DIR [extra hybridfuzz fuzz args...]
#
# PARTS_DIR/SHA256_FILE: a vLLM wheelhouse made by shared/gpu/make-bundle.sh on a machine with
# an index (0.26.0: 3 parts, 0.32.0: 18 parts). Installs vLLM into /tmp/vllm-site (or reuses it)
# and runs `hybridfuzz fuzz --engine gpu` through gpu/hf.sh; findings (YAML), summary.json,
# events.jsonl and fuzz.log land in OUT_DIR.
set -euo pipefail
parts=${1:?usage: run-campaign.sh PARTS_DIR SHA256_FILE BUDGET OUT_DIR [fuzz args...]}
sum=${2:?}; budget=${3:?}; out=${4:?}; shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
set -o pipefail
bash "$here/gpu/hf.sh" "$parts" "$sum" "${VLLM_SITE:-/tmp/vllm-site}" -- fuzz --engine gpu --budget "$budget" \
  --out "$out" --findings "$out/findings" "$@" 2>&1 | tee "$out/fuzz.log"
