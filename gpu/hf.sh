#!/usr/bin/env bash
# Run any hybridfuzz command on an offline GPU host against a vLLM wheelhouse.
#
#   gpu/hf.sh PARTS_DIR SHA256_FILE SITE -- hybridfuzz ARGS...
#
# Installs the bundle (made by shared/gpu/make-bundle.sh) into SITE once, snapshots this
# checkout into SITE.src (so later edits of the checkout cannot change a running job), makes
# hybridfuzz importable there through a link farm (no index, no build), and runs the command
# from SITE.src, where ./corpus is the checkout's corpus. Two versions side by side:
#   gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- hybridfuzz shrink corpus/gpu/x.yaml --workers 8
#   gpu/hf.sh /tmp/p32 /tmp/sha32 /tmp/site32 -- hybridfuzz bench --at-once 8,16
# A bundle made --beside another (make-bundle.sh) goes on top of that one's site:
#   HF_BASE_SITE=/tmp/site33 gpu/hf.sh /tmp/p34 /tmp/sha34 /tmp/site34 -- hybridfuzz campaign --engine gpu ...
set -euo pipefail
parts=${1:?usage: hf.sh PARTS_DIR SHA256_FILE SITE -- hybridfuzz ARGS...}
sum=${2:?}; site=${3:?}; shift 3
case $site in /*) ;; *) site=$PWD/$site ;; esac  # links and PYTHONPATH must survive the cd below
[ "${1:-}" = "--" ] && shift
[ "${1:-}" = "hybridfuzz" ] && shift
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$site/.installed-$(cat "$sum")" ]; then
  rm -rf "$site"
  bash "$here/gpu/install-on-host.sh" "$parts" "$sum" "$site" 2>&1 | tail -3
  touch "$site/.installed-$(cat "$sum")"
fi
src=$site.src
if [ ! -d "$src/.hybridfuzz-core" ] || [ "${HF_RESNAPSHOT:-0}" = 1 ]; then
  rm -rf "$src"; mkdir -p "$src"
  # not the bundle, git, a virtualenv or the tools' caches in the checkout (a .venv there once went into every snapshot)
  (cd "$here" && tar --exclude=./.gpu --exclude=./.git --exclude='./*.egg-info' --exclude=./.venv --exclude=./.hypothesis \
      --exclude=./.pytest_cache --exclude=./.ruff_cache -cf - .) | tar -C "$src" -xf -
  # the installed layout: strategies/ -> hybridfuzz.strategies, oracles/ -> hybridfuzz.oracles.
  # The package dir itself becomes that link farm, since commands run from $src (cwd first on sys.path).
  mv "$src/hybridfuzz" "$src/.hybridfuzz-core"
  mkdir -p "$src/hybridfuzz"
  for f in "$src"/.hybridfuzz-core/*; do ln -s "$f" "$src/hybridfuzz/$(basename "$f")"; done
  ln -s "$src/strategies" "$src/hybridfuzz/strategies"
  ln -s "$src/oracles" "$src/hybridfuzz/oracles"
  # vLLM loads plugins by entry point, so the snapshot carries a dist-info with pyproject.toml's: without it no engine
  # here would apply HYBRIDFUZZ_FAULT or HYBRIDFUZZ_MEND (hybridfuzz/faults/)
  python3 - "$src" <<'PY'
import os, sys, tomllib
src = sys.argv[1]
project = tomllib.load(open(os.path.join(src, "pyproject.toml"), "rb"))["project"]
info = os.path.join(src, f"{project['name']}-{project['version']}.dist-info")
os.makedirs(info, exist_ok=True)
open(os.path.join(info, "METADATA"), "w").write(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
with open(os.path.join(info, "entry_points.txt"), "w") as f:
    for group, points in project.get("entry-points", {}).items():
        f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n")
PY
  # bytecode now (install-on-host.sh says why); compileall does not follow links, so the link farm's own files
  # and the directories behind it are named one by one
  python3 -m compileall -q "$src/hybridfuzz" "$src/.hybridfuzz-core" "$src/strategies" "$src/oracles" > /dev/null 2>&1 || true
fi
export PYTHONPATH="$src:$site${HF_BASE_SITE:+:$HF_BASE_SITE}${PYTHONPATH:+:$PYTHONPATH}"
# the bundle's pin overrides, for the run's summary (hybridfuzz/vllm_facts.py PIN_OVERRIDES_ENV)
HYBRIDFUZZ_PIN_OVERRIDES=$( { sed -n 's/^override //p' "$site/bundle-info.txt" 2>/dev/null || true; } | paste -sd, -)
export HYBRIDFUZZ_PIN_OVERRIDES
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
cd "$src"
if [ "${1:-}" = python3 ]; then exec "$@"; fi  # e.g. python3 -m vllm.collect_env
exec python3 -m hybridfuzz.cli "$@"
