#!/bin/sh
# How long can an allocation wait on the interposer's lock, and does its
# pointer table stay the size of what is live? bench/speed/preload_table.c on the
# stub CUDA driver of the tests, under this build's interposer and, given a
# second one (another build, e.g. an older commit's), under that one too.
# Usage: bench/speed/preload-table.sh BUILD_DIR [OTHER_PRELOAD.so] [THREADS PAIRS BURST]
set -eu
b=${1:?usage: bench/speed/preload-table.sh BUILD_DIR [OTHER_PRELOAD.so] [THREADS PAIRS BURST]}
other=${2:-}
threads=${3:-8}
pairs=${4:-2000000}
burst=${5:-2000000}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cc -O2 -o "$d/preload_table" "$(dirname "$0")/preload_table.c" -ldl -lpthread
for pre in "$b/libvramledger-preload.so" $other; do
  printf '%s: ' "$pre"
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$b/tests/stub "$d/preload_table" "$threads" "$pairs" "$burst"
done
