#!/usr/bin/env bash
# Start a command detached (its own session), so it outlives the remote command that started
# it (some remote-execution channels end a command's other processes when it returns). Its output goes
# to $HF_RES/NAME.log and its exit status to $HF_RES/NAME.rc (HF_RES defaults to /tmp/res).
#
#   gpu/bg.sh NAME CMD [ARGS...]
#   gpu/bg.sh shrink26 bash gpu/hf.sh /tmp/p26 /tmp/sha26 /tmp/site26 -- shrink CASE.yaml
set -euo pipefail
res=${HF_RES:-/tmp/res}
name=${1:?usage: bg.sh NAME CMD [ARGS...]}; shift
mkdir -p "$res"
rm -f "$res/$name.rc"
setsid nohup bash -c '"$@" > "$0.log" 2>&1; echo $? > "$0.rc"' "$res/$name" "$@" < /dev/null > /dev/null 2>&1 &
echo "started $name (pid $!): $*"
