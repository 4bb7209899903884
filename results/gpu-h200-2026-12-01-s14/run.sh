#!/usr/bin/env bash
# The fourteenth session ran a byte-for-byte copy of the twelfth session's run.sh (only its first comment line
# differed); this wrapper stands in for that copy: run.sh c26|c32 BUDGET_S.
exec bash "$(dirname "$0")/../gpu-h200-2026-12-01-s12/run.sh" "$@"
