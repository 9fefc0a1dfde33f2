#!/bin/bash
# Does measuring a job change its peak reserved? Each layer on and off.
#   bench/gpu/run.sh perturb [NAME...]   (default: deberta3-amp-adamw-eager roberta-amp-adamw)
# Each entry of measure.py's suites runs on the GPU six ways: alone; under
# `vramledger run` (interposer and probe), `run --no-preload` (the probe
# alone), `run --no-probe` (the interposer alone); under `vramledger trace`
# (tracer and probe) and `trace` with VRAMLEDGER_PROBE=0 (the tracer
# alone). One measure.py record each, $OUT/NAME.MODE.json, and a line
# NAME MODE peak_allocated peak_reserved in $OUT/summary.txt.
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
m=python/vramledger/measure.py
names=("$@")
[ ${#names[@]} = 0 ] && names=(deberta3-amp-adamw-eager roberta-amp-adamw)
for n in "${names[@]}"; do
  for mode in alone run probe interposer trace tracer; do
    j=$o/$n.$mode.json
    job=(python3 $m $j --in-process --suite $n)
    w=/tmp/perturb-$n-$mode
    rm -rf $w
    case $mode in
    alone) "${job[@]}" ;;
    run) $vl run --quiet --out $w -- "${job[@]}" ;;
    probe) $vl run --quiet --no-preload --out $w -- "${job[@]}" ;;
    interposer) $vl run --quiet --no-probe --out $w -- "${job[@]}" ;;
    trace) $vl trace --out $w -- "${job[@]}" > /dev/null ;;
    tracer) VRAMLEDGER_PROBE=0 $vl trace --out $w -- "${job[@]}" > /dev/null ;;
    esac > "$o/$n.$mode.log" 2>&1
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]['measured']
print(sys.argv[2], sys.argv[3], r['peak_allocated'], r['peak_reserved'])" "$j" "$n" "$mode" >> "$o/summary.txt" 2>&1
  done
done
cat "$o/summary.txt"
