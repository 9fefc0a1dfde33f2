#!/bin/bash
# Device evidence of the eighth session (2026-11-29).
# PART=1 (one GPU kind or two): issue 3 — a third set of configurations
#   outside the calibration set (bench/configs/unseen3.jsonl), measured
#   before the training replay's per-layer sequence was rewritten and used
#   for nothing but judging it (bench/session6_gpu.sh PART=8 does the runs).
# PART=2 (two GPUs): issue 8 — GPT-2 DDP's two peaks: four runs each as it
#   is, with static_graph=True (DDP never rebuilds its buckets) and with
#   gradient_as_bucket_view=True (gradients are views of the buckets).
# Needs build-rel/ (carry). Results under $OUT in few files.
set -u
. bench/device_env.sh
mkdir -p "$o"
record_env "$o/env8-$PART.txt"
if [ "$PART" = 1 ]; then
  UNSEEN=bench/configs/unseen3.jsonl UNSEEN_TAG=unseen3 PART=8 bash bench/session6_gpu.sh > /dev/null
fi
if [ "$PART" = 2 ]; then
  for i in 1 2 3 4; do
    for m in ddp ddp-static ddp-bucket-view; do
      torchrun --standalone --nproc-per-node 2 bench/multi_gpu_job.py --mode $m 2>>"$o/errors8-2.txt" |
          grep '^{' >> "$o/ddp8.jsonl"
    done
  done
  tail -c 8000 "$o/errors8-2.txt" > "$o/errors8-2-tail.txt"; rm -f "$o/errors8-2.txt"
fi
ls -la "$o"
