#!/bin/bash
# How long can an allocation wait in the interposer with 8 threads on this host's cores?
#   bench/gpu/run.sh preload-table [OTHER_PRELOAD.so ...]   (PT_PAIRS, PT_BURST: pairs a
#   thread and the burst held at once, default 12.5 M and 2 M: 10^8 pairs; PT_LIMIT_S:
#   seconds each run may take, default 300)
# bench/speed/preload_table.c (build-rel/preload_table) on the tests' stub CUDA
# driver (build-rel/tests/stub) under build-rel's interposer, then under each
# OTHER_PRELOAD.so, each under /usr/bin/time -v: $OUT/preload-table/<name>.txt
# is the program's line and time's, machine.txt the cores and kernel.
set -u
. bench/gpu/env.sh
d=$o/preload-table
mkdir -p "$d"
{ nproc; lscpu | grep 'Model name'; uname -r; date -u; } > "$d/machine.txt"
for so in "$PWD/build-rel/libvramledger-preload.so" "$@"; do
  n=$(basename "$so" .so)
  timeout "${PT_LIMIT_S:-300}" /usr/bin/time -v env LD_PRELOAD="$so" \
    LD_LIBRARY_PATH="$PWD/build-rel/tests/stub" build-rel/preload_table 8 \
    "${PT_PAIRS:-12500000}" "${PT_BURST:-2000000}" > "$d/$n.txt" 2>&1
  echo "$n: exit $?"
done
