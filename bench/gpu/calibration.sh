#!/bin/bash
# The calibration set's question and the measured constants beside it (bench/results/calibration/, cuda-reduce/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_calibration).
#
# suite calibration: How close is the estimator on the calibration set (each configuration in a process of its own, 2 GPUs)?
#   bench/gpu/run.sh calibration
# The calibration suite of python/vramledger/measure.py, half on each GPU
# ($OUT/cal-a.json, cal-b.json: bench/results/calibration/
# calibration-isolated.json is the two merged), then how long `vramledger
# validate --quick` takes ($OUT/cal-time.txt, validate-quick.txt).
# Needs build-rel/ (carry).
#
# suite cuda-reduce: Are the scratch blocks of ATen's CUDA reductions the sizes vramledger.cuda_reduce computes?
#   bench/gpu/run.sh cuda-reduce
# bench/gpu/jobs/tracer_checks.py cuda-reduce: 2,040 sums, means, amaxes and norms,
# each run once with the allocator's history on, against the model for
# this device (its SMs and threads per SM). Writes $OUT/check.jsonl (one
# line a case) and env.txt (bench/results/cuda-reduce/).

suite_calibration() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env-calibration.txt"
export PYTHONPATH=$PWD/python
names=$(python3 -c "from vramledger.measure import CALIBRATION as C; print(' '.join(c['name'] for c in C))")
a= b= i=0
for n in $names; do if [ $((i % 2)) = 0 ]; then a="$a,$n"; else b="$b,$n"; fi; i=$((i + 1)); done
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 python3 python/vramledger/measure.py "$o/cal-a.json" --suite "${a#,}" \
    > "$o/cal-a.log" 2>&1 &
CUDA_VISIBLE_DEVICES=1 python3 python/vramledger/measure.py "$o/cal-b.json" --suite "${b#,}" \
    > "$o/cal-b.log" 2>&1 &
wait
echo "suite of $i configurations on 2 GPUs: $(( $(date +%s) - t0 )) s" >> "$o/cal-time.txt"
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 $vl validate --quick --out /tmp/vq > "$o/validate-quick.txt" 2>&1
echo "validate --quick: rc $? in $(( $(date +%s) - t0 )) s" >> "$o/cal-time.txt"
cp /tmp/vq/*.json "$o/" 2>/dev/null
tail -c 20000 "$o/cal-a.log" > "$o/cal-a-tail.log"; tail -c 20000 "$o/cal-b.log" > "$o/cal-b-tail.log"
rm -f "$o/cal-a.log" "$o/cal-b.log"
ls -la "$o"
}

suite_cuda_reduce() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
python3 bench/gpu/jobs/tracer_checks.py cuda-reduce > "$o/check.jsonl"
}

suite=${VL_SUITE:-calibration}
"suite_${suite//-/_}" "$@"
