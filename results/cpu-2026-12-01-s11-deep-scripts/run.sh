cd /work/main
for S in 1 2; do
  for M in 6 12; do
    timeout 600 hybridfuzz fuzz --engine cpu --budget 4m --seed $S --max-steps $M --kv-dtypes auto --families qwen3_next \
      --workers 1 --cases-per-engine 24 --shrink background --out /tmp/ab/m$M-s$S --findings /tmp/ab/m$M-s$S/found --known /tmp/known-ab > /tmp/ab/m$M-s$S.log 2>&1 &
  done
  wait
done
echo done > /tmp/ab/done
