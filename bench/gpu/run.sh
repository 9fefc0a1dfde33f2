#!/bin/sh
# The device runner: run one named suite on the H200 machine.
#   bench/gpu/run.sh SUITE [ARGS...]   (from any directory; OUT: the results folder, default /tmp/out)
#   bench/gpu/run.sh                   lists the suites, each with the question it answers
# A suite is run from the repository root with bash, VL_SUITE naming it: a
# file of its own, bench/gpu/SUITE.sh, or a function suite_SUITE of the
# file of its question (the table below; its header has a line
# "# suite SUITE: question" for each). It sources bench/gpu/env.sh
# (the carried build-rel/, NVLink multicast off) and writes under $OUT.
# Suites with several runs take the run's name as ARGS (bench/gpu/run.sh
# ddp-rebuild trials); bench/README.md says which results folder each wrote.
set -eu
cd "$(dirname "$0")/../.."
# SUITE=FILE: the suites that are a function of their question's file
shared="cuda-reduce=calibration histories=trace dry-run-unseen=dry-run estimate-dry-run=dry-run known-misses=dry-run
trace-meta=trace trace-batch=trace types-unseen=types ddp-rebuild=ddp
probe-boundaries=probe spike=interposer preload-table=interposer
sampler-cost=interposer gc-timing=interposer perturb=interposer"
file_of() {
  for p in $shared; do
    if [ "${p%%=*}" = "$1" ]; then
      echo "${p#*=}"
      return
    fi
  done
  echo "$1"
}
if [ $# = 0 ]; then
  for f in bench/gpu/*.sh; do
    s=$(basename "$f" .sh)
    case $s in run | env) continue ;; esac
    if grep -q '^# suite ' "$f"; then
      sed -n 's/^# suite \([a-z0-9-]*\): /\1\t/p' "$f" | while IFS="$(printf '\t')" read -r n q; do
        printf '%-20s %s\n' "$n" "$q"
      done
    else
      printf '%-20s %s\n' "$s" "$(sed -n '2s/^# //p' "$f")"
    fi
  done
  exit 0
fi
name=$1
shift
file=$(file_of "$name")
case $name in run | env | */*) file= ;; esac
if [ -z "$file" ] || [ ! -f "bench/gpu/$file.sh" ] ||
  { [ "$file" = "$name" ] && grep -q '^suite_' "bench/gpu/$file.sh" && ! grep -q "^suite_$(echo "$name" | tr - _)()" "bench/gpu/$file.sh"; }; then
  echo "bench/gpu/run.sh: no suite '$name' (bench/gpu/run.sh with no argument lists them)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/out}
VL_SUITE=$name
export OUT VL_SUITE
mkdir -p "$OUT"
exec bash "bench/gpu/$file.sh" "$@"
