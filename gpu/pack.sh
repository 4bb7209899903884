#!/usr/bin/env bash
# Copy what detached jobs wrote so far ($HF_RES, default /tmp/res) into $OUT/res.tgz, leaving out the
# example databases and claims (large, and only useful on the host). Run it at the end of every
# waiting call: a host handed back early then still leaves its results with the caller.
res=${HF_RES:-/tmp/res}
tar -czf "${OUT:?}/res.tgz" --exclude='*/database' --exclude='*/hypothesis-db' --exclude='*/claims' -C "$(dirname "$res")" "$(basename "$res")" 2>/dev/null
ls -la "$OUT/res.tgz" | awk '{print "packed", $5, "bytes"}'
