#!/bin/sh
# The sampling loop's own CPU share on the development machine (no GPU:
# the fake NVML of the tests, the interposer on the stub CUDA runtime, a
# job holding 64 MiB for 5 s), for the vramledger binaries given,
# interleaved, at each interval. The fake NVML costs nothing: this
# measures vramledger's own side (counters, formatting, writing,
# sleeping), not NVML's. Before each interval's runs, the floor: what a
# loop that only sleeps to the same deadlines costs (one JSON line with
# "floor": true).
#   sh bench/speed/sampler-cost.sh [--interval-ms "1 10 100"] [--reps N] BINARY...
# (after a build of build-rel/ with its tests: cmake -S . -B build-rel
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel)
set -u
intervals=10 reps=3
while [ $# -gt 0 ]; do
  case $1 in
  --interval-ms) intervals=$2; shift 2 ;;
  --reps) reps=$2; shift 2 ;;
  *) break ;;
  esac
done
cd "$(dirname "$0")/../.."
stub=$PWD/build-rel/tests/stub fake=$PWD/build-rel/tests/fake/libnvidia-ml.so.1
# the floor: a loop that only sleeps as the sampler does (bench/speed/tick_floor.c)
floor=$(mktemp)
cc -O2 -o "$floor" bench/speed/tick_floor.c || floor=
rep=1
while [ $rep -le "$reps" ]; do
  for ms in $intervals; do
    [ -n "$floor" ] && "$floor" "$ms" $((5000 / ms))
    for bin in "$@"; do
      d=$(mktemp -d)
      LD_LIBRARY_PATH=$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} VRAMLEDGER_NVML_LIB=$fake VRAMLEDGER_PROBE=0 \
        VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so \
        "$bin" run --quiet --interval-ms "$ms" --out "$d/r" -- build-rel/tests/preload_test hold 64 5
      tail -1 "$d/r/record.jsonl" | python3 -c "
import json, sys
e = json.load(sys.stdin)
print(json.dumps({'binary': '$bin', 'interval_ms': $ms, 'rep': $rep, 'samples': e['samples'],
  'sampling_cpu_us_per_sample': round(e['sampling_cpu_ns'] / e['samples'] / 1e3, 2),
  'sampling_cpu_pct_of_one_core': round(100 * e['sampling_cpu_ns'] / e['sampling_wall_ns'], 3),
  'all_cpu_pct_of_one_core': round(100 * e['sampler_cpu_ns'] / e['wall_ns'], 3)}))"
      rm -rf "$d"
    done
  done
  rep=$((rep + 1))
done
[ -n "$floor" ] && rm -f "$floor"
