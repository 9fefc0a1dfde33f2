#!/bin/bash
# Are the scratch blocks of ATen's CUDA reductions the sizes vramledger.cuda_reduce computes?
#   bench/gpu/run.sh cuda-reduce
# bench/gpu/jobs/tracer_checks.py cuda-reduce: 2,040 sums, means, amaxes and norms,
# each run once with the allocator's history on, against the model for
# this device (its SMs and threads per SM). Writes $OUT/check.jsonl (one
# line a case) and env.txt (bench/results/cuda-reduce/).
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
python3 bench/gpu/jobs/tracer_checks.py cuda-reduce > "$o/check.jsonl"
