#!/usr/bin/env bash
# Build an offline vLLM wheelhouse for the GPU host (Python 3.12, x86-64, CUDA 13 driver,
# torch 2.11 preinstalled; gpu/host-spec.txt), for ANY vLLM release, split into parts small
# enough to copy over a size-limited channel.
#
#   gpu/make-bundle.sh VLLM_VERSION OUT_DIR [PART_MB] [--override PKG==VER]... [--beside BASE_OUT_DIR]
#
# --override replaces one of the release's own pins, for a release that pins a wheel the package index lacks (vLLM
# 0.34.0 pins flashinfer-python==0.7.3; only 0.7.4 is published): gpu/make-bundle.sh 0.34.0 .gpu/b34 --override
# flashinfer-python==0.7.4. The bundle records it (bundle-info.txt), and a run through gpu/hf.sh names it in its summary.
# --beside leaves out the wheels BASE_OUT_DIR's bundle already carries at the same version (a release next to one
# installed on the host often differs by a few wheels): install it with the base's site on the path,
# HF_BASE_SITE=/tmp/site33 gpu/hf.sh PARTS SHA SITE -- ...
#
# What rides along is derived from the release's own metadata by gpu/bundle_plan.py (uv resolves
# vllm==X for the host, preferring the host's own versions); OUT_DIR/plan.txt records it and
# OUT_DIR/plan-explained.txt says why each package rides or stays. OUT_DIR gets parts/part-NN
# (<= PART_MB MiB each; by default what fits a 64 MiB transfer beside the working tree, at most 44), SHA256 and
# install-on-host.sh. On the host: gpu/hf.sh or
# install-on-host.sh PARTS SHA256 TARGET.
set -euo pipefail
usage="usage: make-bundle.sh VLLM_VERSION OUT_DIR [PART_MB] [--override PKG==VER]... [--beside BASE_OUT_DIR]"
overrides=() beside="" args=()
while [ $# -gt 0 ]; do
  case $1 in
    --override) overrides+=(--override "${2:?$usage}"); shift 2 ;;
    --beside) beside=${2:?$usage}; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]}"
ver=${1:?$usage}
out=${2:?$usage}
if [ -n "$beside" ] && [ ! -f "$beside/plan.txt" ]; then echo "make-bundle.sh: --beside $beside has no plan.txt" >&2; exit 2; fi
# For hosts reached through a channel that carries 64 MiB at a time, a part and the working tree together, with some
# overhead: the default part leaves room for the tree as it is now and 8 MiB (the channel's overhead, and results
# committed after the build); at most 44.
tracked_mib=$(git -C "$(dirname "$0")/.." ls-files -z 2>/dev/null | (cd "$(dirname "$0")/.." && xargs -0 -r du -cb 2>/dev/null) | tail -1 | awk '{print int($1 / 1048576) + 1}' || true)
fit=$(( 64 - ${tracked_mib:-20} - 8 )); [ "$fit" -gt 44 ] && fit=44; [ "$fit" -lt 8 ] && fit=8
part_mb=${3:-$fit}
case $part_mb in ''|*[!0-9]*) echo "make-bundle.sh: PART_MB must be a whole number of MiB, got '$part_mb'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

dl() {  # wheels for the GPU host's interpreter, never their dependencies (the plan is the closure)
  python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 \
    --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_18_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any -d "$work/$1" "${@:2}" 2>&1 \
    | grep -v "^WARNING: Location" >&2 || true
}

mkdir -p "$out"
echo "planning vLLM $ver against $here/host-spec.txt (parts of ${part_mb} MiB; ${tracked_mib:-?} MiB tracked) ..."
python3 "$here/bundle_plan.py" "$ver" "${overrides[@]}" --explain > "$out/plan.txt" 2> "$out/plan-explained.txt" || {
  cat "$out/plan-explained.txt" >&2; exit 2; }
echo "  $(wc -l < "$out/plan.txt") wheels ride along: $(grep -E '^(torch|triton|flashinfer-python|nvidia-nccl[^=]*)==' "$out/plan.txt" | tr '\n' ' ')"

echo "downloading vLLM $ver and the planned wheels ..."
dl vllm "vllm==$ver"
ls "$work"/vllm/vllm-*.whl > /dev/null 2>&1 || { echo "make-bundle.sh: no vllm==$ver wheel for Python 3.12 x86-64" >&2; exit 2; }
ship="$out/plan.txt"
if [ -n "$beside" ]; then  # only what the base bundle lacks, or carries at another version
  grep -vxF -f "$beside/plan.txt" "$out/plan.txt" > "$out/plan-beside.txt" || true
  ship="$out/plan-beside.txt"
  echo "  beside $beside: $(wc -l < "$ship") of $(wc -l < "$out/plan.txt") wheels ride; the rest come from the base's site"
fi
mkdir -p "$work/whl"
[ -s "$ship" ] && dl whl -r "$ship"
want=$(wc -l < "$ship"); got=$(ls "$work"/whl | wc -l)
if [ "$got" -lt "$want" ]; then echo "make-bundle.sh: downloaded $got of $want planned wheels" >&2; exit 1; fi

echo "slimming vLLM (drops FlashAttention-2, the Rust frontend and C++ headers) ..."
mkdir -p "$work/tree"
(cd "$work/tree" && unzip -q "$work"/vllm/vllm-*.whl)
rm -f "$work/tree/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so" "$work/tree/vllm/vllm-rs"
rm -rf "$work/tree/vllm/third_party/deep_gemm/include" "$work/tree/vllm/third_party/fmha_sm100/cutlass"
tar -C "$work/tree" -cf - . | xz -T0 -6 > "$work/vllm-tree.tar.xz"

echo "packing ..."
{ echo "vllm==$ver"
  [ ${#overrides[@]} -gt 0 ] && printf 'override %s\n' $(printf '%s\n' "${overrides[@]}" | grep -v -- --override)
  [ -n "$beside" ] && echo "beside $(cat "$beside/SHA256")"
  true; } > "$work/bundle-info.txt"
cp "$work/bundle-info.txt" "$out/"
tar -C "$work" -cf "$work/bundle.tar" whl vllm-tree.tar.xz bundle-info.txt
mkdir -p "$out/parts"
rm -f "$out"/parts/part-*
split -b "${part_mb}M" -d -a 3 "$work/bundle.tar" "$out/parts/part-"
(cd "$work" && sha256sum bundle.tar | cut -d' ' -f1) > "$out/SHA256"
cp "$here/install-on-host.sh" "$here/unpack_wheels.py" "$out/"
echo "vLLM $ver bundle: $(ls "$out/parts" | wc -l) parts in $out/parts ($(du -sh "$out/parts" | cut -f1)), $(( $(date +%s) - t0 )) s"
