#!/usr/bin/env bash
# The thirty-first session's second, short lease (545 device seconds left), written 2026-12-05: does a real GPU fault
# get the new device-fault signature (71e48ea) on vLLM 0.33.0? One fresh run of the case that crashes reliably,
# `zamba2-int4-per-token-head-warm-history-crash` (11c48cea), alone on the GPU, through gpu/lease.sh (its first real
# use). Its device-fault signature, computed on CPU: health:device-fault:daf61b86.
set -u
cd "$(dirname "$0")/../.."
here=$PWD
source gpu/lease.sh 33
lease_sampler
lease_install 38
replay_job 11c48cea 1 zamba2-int4-per-token-head-warm-history-crash
wait "${jobs[@]}"
lease_end
