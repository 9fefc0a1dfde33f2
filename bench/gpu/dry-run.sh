#!/bin/bash
# How close is `vramledger trace`'s dry run (meta tensors, or the CPU under autocast) to the H200's peaks, and PyTorch's MemTracker beside it?
#   bench/gpu/run.sh dry-run [--only NAME,...]
# bench/gpu/jobs/dry_run.py over bench/configs/dry-run.txt with
# --memtracker: writes $OUT/dry-run.jsonl, memtracker.jsonl and
# traces.tar.xz; bench/accuracy/dry_run_table.py compares them with the
# H200's measurements (bench/results/dry-run/). Runs on the device
# machine's CPUs (its torch has CUDA for MemTracker's fake tensors); needs
# build-rel/ (carry).
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
VL=$vl CUDA_VISIBLE_DEVICES= python3 bench/gpu/jobs/dry_run.py "$o" --memtracker "$@"
