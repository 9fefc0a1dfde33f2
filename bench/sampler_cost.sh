#!/bin/sh
# The sampler's own CPU time (utime + stime of the vramledger process, from
# /proc) while a job holds GPU memory, at 10 ms and at 100 ms.
set -u
vl=$PWD/build-rel/vramledger
export VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so
hz=$(getconf CLK_TCK)
for ms in 10 100; do
  $vl run --quiet --interval-ms $ms --out /tmp/sc-$ms -- python3 -c "
import torch, time
x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')
time.sleep(12)" &
  vp=$!
  sleep 1
  t0=$(awk '{print $14 + $15}' /proc/$vp/stat)
  s0=$(date +%s.%N)
  sleep 10
  t1=$(awk '{print $14 + $15}' /proc/$vp/stat)
  s1=$(date +%s.%N)
  wait $vp
  samples=$(grep -c '"type":"sample"' /tmp/sc-$ms/record.jsonl)
  awk -v a="$t0" -v b="$t1" -v h="$hz" -v s0="$s0" -v s1="$s1" -v ms="$ms" -v n="$samples" 'BEGIN {
    printf "{\"interval_ms\": %d, \"cpu_s\": %.3f, \"wall_s\": %.3f, \"cpu_pct_of_one_core\": %.2f, \"samples\": %d}\n",
           ms, (b - a) / h, s1 - s0, 100 * (b - a) / h / (s1 - s0), n }' 
done
