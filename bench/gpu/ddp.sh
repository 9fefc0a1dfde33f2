#!/bin/bash
# How much does each rank hold under DDP and FSDP on 1 and 2 GPUs, and under `vramledger run`?
#   bench/gpu/run.sh ddp
# (bench/results/ddp-rebuild/README.md#ddp) On two H200s: GPT-2 under DDP, FSDP full shard
# and FSDP shard-grad-op on 1 and 2 GPUs (every rank's peak, step time), one
# DDP run under `vramledger run` (its record, report and doctor). Runs
# bench/gpu/trace-meta.sh beside it (CPU only). Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
( bash bench/gpu/trace-meta.sh > $o/meta-log.txt 2>&1 ) &
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $o/multi-env.txt
for mode in ddp fsdp-full fsdp-grad-op; do
  for n in 1 2; do
    torchrun --standalone --nproc-per-node $n bench/gpu/jobs/multi_gpu_job.py --mode $mode 2>>$o/multi-err.txt \
        | grep '^{' >> $o/multi.jsonl
  done
done
$vl run --quiet --out /tmp/ddp-run -- torchrun --standalone --nproc-per-node 2 bench/gpu/jobs/multi_gpu_job.py --mode ddp \
    2>>$o/multi-err.txt | grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-under-vl-run"/' >> $o/multi.jsonl
$vl report /tmp/ddp-run --format json > $o/ddp-report.json 2>>$o/multi-err.txt
$vl doctor /tmp/ddp-run --format json > $o/ddp-doctor.json 2>>$o/multi-err.txt
wait
tail -c 20000 $o/multi-err.txt > $o/multi-err-tail.txt; rm -f $o/multi-err.txt
ls -la $o
