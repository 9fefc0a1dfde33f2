#!/bin/sh
# The scratch of ATen's CUDA reductions on this GPU against
# vramledger.cuda_reduce (bench/gpu/jobs/cuda_reduce_check.py), into
# $OUT/cuda-reduce/: check.jsonl (one line a case), env.txt.
set -u
. bench/device_env.sh
mkdir -p $o/cuda-reduce
record_env $o/cuda-reduce/env.txt
python3 bench/gpu/jobs/cuda_reduce_check.py > $o/cuda-reduce/check.jsonl 2> $o/cuda-reduce/stderr.txt
tail -1 $o/cuda-reduce/stderr.txt
