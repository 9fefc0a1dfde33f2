#!/bin/sh
# The sampling loop's own CPU share at 100 Hz on the development machine
# (no GPU: the fake NVML of the tests, the interposer on the stub CUDA
# runtime, a job holding 64 MiB for 5 s), for the vramledger binaries
# given, interleaved. The fake NVML costs nothing: this measures
# vramledger's own side (formatting, writing, sleeping), not NVML's.
#   sh bench/speed/sampler-cost.sh BINARY... (after a build of build-rel/)
set -u
cd "$(dirname "$0")/../.."
stub=$PWD/build-rel/tests/stub fake=$PWD/build-rel/tests/fake/libnvidia-ml.so.1
for rep in 1 2 3; do
  for bin in "$@"; do
    d=$(mktemp -d)
    LD_LIBRARY_PATH=$stub VRAMLEDGER_NVML_LIB=$fake VRAMLEDGER_PROBE=0 \
      VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so \
      "$bin" run --quiet --interval-ms 10 --out "$d/r" -- build-rel/tests/preload_test hold 64 5
    tail -1 "$d/r/record.jsonl" | python3 -c "
import json, sys
e = json.load(sys.stdin)
print(json.dumps({'binary': '$bin', 'rep': $rep, 'samples': e['samples'],
  'sampling_cpu_pct_of_one_core': round(100 * e['sampling_cpu_ns'] / e['sampling_wall_ns'], 3),
  'all_cpu_pct_of_one_core': round(100 * e['sampler_cpu_ns'] / e['wall_ns'], 3)}))"
    rm -rf "$d"
  done
done
