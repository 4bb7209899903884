#!/usr/bin/env bash
# Save or restore a GPU host's kernel caches (Triton, FlashInfer JIT), so that a fresh host does not spend its
# first minutes compiling: on 2026-12-01 a 4-minute warm-up campaign left about 18 FlashInfer compilers running
# into the measured campaign (results/2026-12-01-h200-vllm0.26.0-0.32.0-24-cases-12-steps/README.md).
#
#   gpu/caches.sh save DIR      tar ~/.triton/cache and ~/.cache/flashinfer into DIR/tri.tgz.part-* and
#                               DIR/fi.tgz.part-* (15 MiB parts, for hosts reached through a size-limited channel)
#   gpu/caches.sh save-new DIR  the same, with only the files written since the last restore: what this host
#                               compiled. An H200 host (2026-12-01, vLLM 0.32.0) compiled about 100 MB more on top
#                               of a restored 940 MB: that part alone is quick to bring back.
#   gpu/caches.sh restore DIR [DIR...]
#                               unpack those parts (checked against DIR/caches.sha256 when present), in order: a
#                               whole save, then the new files saved on top of it
set -euo pipefail
mode=${1:?usage: caches.sh save|save-new|restore DIR [DIR...]}; shift
dir=${1:?usage: caches.sh save|save-new|restore DIR [DIR...]}
marker="$HOME/.cache/hybridfuzz-caches-restored"  # its time is the last restore's
pack() {  # pack NAME PARENT SUBDIR [find -newer args]: PARENT/SUBDIR (or the part of it newer than the marker) into NAME.tgz
  local name=$1 parent=$2 sub=$3; shift 3
  mkdir -p "$parent/$sub"
  (cd "$parent" && find "$sub" -type f "$@" -print0 | tar --null -T - -cf -) | gzip -1 > "$dir/$name.tgz"
}
case $mode in
  save|save-new)
    mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
    newer=()
    if [ "$mode" = save-new ]; then
      [ -f "$marker" ] || { echo "caches.sh: save-new: nothing was restored on this host (no $marker)" >&2; exit 2; }
      newer=(-newer "$marker")
    fi
    pack tri "$HOME/.triton" cache ${newer[@]+"${newer[@]}"}
    pack fi "$HOME/.cache" flashinfer ${newer[@]+"${newer[@]}"}
    (cd "$dir" && sha256sum tri.tgz fi.tgz > caches.sha256 && split -b 15m tri.tgz tri.tgz.part- &&
      split -b 15m fi.tgz fi.tgz.part- && rm tri.tgz fi.tgz)
    ls "$dir" ;;
  restore)
    for dir in "$@"; do
      dir=$(cd "$dir" && pwd)
      for name in tri fi; do cat "$dir/$name".tgz.part-* > "/tmp/$name.tgz"; done
      if [ -f "$dir/caches.sha256" ]; then (cd /tmp && sha256sum -c "$dir/caches.sha256"); fi
      mkdir -p "$HOME/.triton/cache" "$HOME/.cache/flashinfer"
      tar -C "$HOME/.triton" -xzf /tmp/tri.tgz
      tar -C "$HOME/.cache" -xzf /tmp/fi.tgz
      rm -f /tmp/tri.tgz /tmp/fi.tgz
    done
    touch "$marker"
    sleep 1  # files the host writes from now on are newer than the marker, even on a coarse clock
    du -sh "$HOME/.triton/cache" "$HOME/.cache/flashinfer" ;;
  *) echo "usage: caches.sh save|save-new|restore DIR [DIR...]" >&2; exit 2 ;;
esac
