#!/bin/bash
# Issue 8 follow-up: DDP's rank 0 read 474 MiB less max_memory_allocated
# under `vramledger run` than without (bench/results/ddp).
# Repeat: under run with the probe, under run without it (--no-probe), and
# plain; with bench/trace_meta.sh beside it (CPU). Needs build-rel/.
set -u
. bench/device_env.sh
( bash bench/trace_meta.sh > $o/meta-log.txt 2>&1 ) &
job="torchrun --standalone --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp"
$vl run --quiet --out /tmp/p1 -- $job 2>/dev/null | grep '^{' | sed 's/"ddp"/"ddp-run-probe"/' >> $o/ddp.jsonl
$vl run --quiet --no-probe --out /tmp/p2 -- $job 2>/dev/null | grep '^{' | sed 's/"ddp"/"ddp-run-noprobe"/' >> $o/ddp.jsonl
$job 2>/dev/null | grep '^{' >> $o/ddp.jsonl
wait
ls -la $o
