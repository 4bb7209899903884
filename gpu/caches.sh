#!/usr/bin/env bash
# Save or restore a GPU host's kernel caches (Triton, FlashInfer JIT), so that a fresh host does not spend its
# first minutes compiling: on 2026-12-01 a 4-minute warm-up campaign left about 18 FlashInfer compilers running
# into the measured campaign (results/gpu-h200-2026-12-01-s11/README.md).
#
#   gpu/caches.sh save DIR      tar ~/.triton/cache and ~/.cache/flashinfer into DIR/tri.tgz.part-* and
#                               DIR/fi.tgz.part-* (15 MiB parts: the device tool returns 8 files of 16 MiB a call)
#   gpu/caches.sh restore DIR   unpack those parts (checked against DIR/caches.sha256 when present)
set -euo pipefail
mode=${1:?usage: caches.sh save|restore DIR}; dir=${2:?}
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
case $mode in
  save)
    tar -C "$HOME/.triton" -cf - cache | gzip -1 > "$dir/tri.tgz"
    tar -C "$HOME/.cache" -cf - flashinfer | gzip -1 > "$dir/fi.tgz"
    (cd "$dir" && sha256sum tri.tgz fi.tgz > caches.sha256 && split -b 15m tri.tgz tri.tgz.part- &&
      split -b 15m fi.tgz fi.tgz.part- && rm tri.tgz fi.tgz)
    ls "$dir" ;;
  restore)
    for name in tri fi; do cat "$dir/$name".tgz.part-* > "/tmp/$name.tgz"; done
    if [ -f "$dir/caches.sha256" ]; then (cd /tmp && sha256sum -c "$dir/caches.sha256"); fi
    mkdir -p "$HOME/.triton" "$HOME/.cache"
    tar -C "$HOME/.triton" -xzf /tmp/tri.tgz
    tar -C "$HOME/.cache" -xzf /tmp/fi.tgz
    rm -f /tmp/tri.tgz /tmp/fi.tgz
    du -sh "$HOME/.triton/cache" "$HOME/.cache/flashinfer" ;;
  *) echo "usage: caches.sh save|restore DIR" >&2; exit 2 ;;
esac
