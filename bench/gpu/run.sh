#!/bin/sh
# The device runner: run one named suite on the H200 machine.
#   bench/gpu/run.sh SUITE [ARGS...]   (from any directory; OUT: the results folder, default /tmp/out)
#   bench/gpu/run.sh                   lists the suites, each with the question it answers
# SUITE is bench/gpu/SUITE.sh, run from the repository root with bash; it
# sources bench/gpu/env.sh (the carried build-rel/, NVLink multicast off)
# and writes under $OUT. Suites with several runs take the run's name as
# ARGS (bench/gpu/run.sh ddp-rebuild trials); bench/README.md says which
# results folder each wrote.
set -eu
cd "$(dirname "$0")/../.."
if [ $# = 0 ]; then
  for f in bench/gpu/*.sh; do
    s=$(basename "$f" .sh)
    case $s in run | env) continue ;; esac
    printf '%-20s %s\n' "$s" "$(sed -n '2s/^# //p' "$f")"
  done
  exit 0
fi
name=$1
shift
suite=$name
case $suite in run | env | */*) suite= ;; esac
if [ -z "$suite" ] || [ ! -f "bench/gpu/$suite.sh" ]; then
  echo "bench/gpu/run.sh: no suite '$name' (bench/gpu/run.sh with no argument lists them)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/out}
export OUT
mkdir -p "$OUT"
exec bash "bench/gpu/$suite.sh" "$@"
