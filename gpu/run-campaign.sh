#!/usr/bin/env bash
# Prepare and run a bounded hybridfuzz campaign on an offline GPU host.
#
#   gpu/run-campaign.sh PARTS_DIR SHA256_FILE BUDGET OUT_DIR [extra hybridfuzz fuzz args...]
#
# PARTS_DIR/SHA256_FILE: a vLLM wheelhouse made by shared/gpu/make-bundle.sh on a machine with
# an index (0.26.0: 3 parts, 0.32.0: 18 parts). Installs vLLM into /tmp/vllm-site (or reuses it),
# makes hybridfuzz importable without an index, then runs `hybridfuzz fuzz --engine gpu` and
# leaves findings (YAML), summary.json, events.jsonl and the log in OUT_DIR.
set -euo pipefail
parts=${1:?usage: run-campaign.sh PARTS_DIR SHA256_FILE BUDGET OUT_DIR [fuzz args...]}
sum=${2:?}; budget=${3:?}; out=${4:?}; shift 4
here=$(cd "$(dirname "$0")/.." && pwd)
site=${VLLM_SITE:-/tmp/vllm-site}
mkdir -p "$out"
if [ ! -f "$site/.installed-$(cat "$sum")" ]; then
  rm -rf "$site"
  bash "$here/gpu/install-on-host.sh" "$parts" "$sum" "$site" 2>&1 | tail -3
  touch "$site/.installed-$(cat "$sum")"
fi
# hybridfuzz without an index: a link farm that mirrors the installed layout
# (strategies/ -> hybridfuzz.strategies, oracles/ -> hybridfuzz.oracles).
farm=/tmp/hybridfuzz-src
rm -rf "$farm"; mkdir -p "$farm/hybridfuzz"
for f in "$here"/hybridfuzz/*; do ln -s "$f" "$farm/hybridfuzz/$(basename "$f")"; done
ln -s "$here/strategies" "$farm/hybridfuzz/strategies"
ln -s "$here/oracles" "$farm/hybridfuzz/oracles"
export PYTHONPATH="$farm:$site${PYTHONPATH:+:$PYTHONPATH}"
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
python3 -c 'import hybridfuzz, vllm, torch; print("hybridfuzz on vllm", vllm.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))'
cd /tmp && python3 -m hybridfuzz.cli fuzz --engine gpu --budget "$budget" --out "$out" "$@" 2>&1 | tee "$out/fuzz.log"
