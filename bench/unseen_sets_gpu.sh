#!/bin/bash
# Device runs of 2026-11-29.
# PART=1 (one GPU kind or two): a third set of configurations
#   outside the calibration set (bench/configs/unseen3.jsonl), measured
#   before the training replay's per-layer sequence was rewritten and used
#   for nothing but judging it (bench/parallel_calibration_gpu.sh PART=8 does the runs).
# PART=2 (two GPUs): GPT-2 DDP's two peaks: four runs each as it
#   is, with static_graph=True (DDP never rebuilds its buckets) and with
#   gradient_as_bucket_view=True (gradients are views of the buckets).
# PART=3: a fourth set outside the calibration set
#   (bench/configs/unseen4.jsonl), measured after the op-by-op training
#   replay was written and used for nothing else.
# PART=4 (two GPUs): pipeline parallelism (bench/pp_job.py:
#   GPT-2 and GPT-2 medium over 2 stages, 1F1B and GPipe).
# PART=5 (two GPUs): three of part 3's runs (its two largest
#   misses and a control) measured three times more each
#   (bench/configs/repeat4.jsonl): is the allocator's reserve repeatable?
# PART=6 (two GPUs): the fifth set (bench/configs/unseen5.jsonl, 20 runs),
#   not run (no device time left); tar the results, the
#   device returns at most 8 files.
# PART=7 (two GPUs): the sixth set and the embedding probe.
# PART=8 (two GPUs): the seventh set, judging the corrections before it.
# PART=9 (two GPUs): GPT-2 DDP with and without a gap between steps.
# Needs build-rel/ (carry). Results under $OUT in few files.
set -u
. bench/device_env.sh
mkdir -p "$o"
record_env "$o/env8-$PART.txt"
if [ "$PART" = 1 ]; then
  UNSEEN=bench/configs/unseen3.jsonl UNSEEN_TAG=unseen3 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
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
if [ "$PART" = 3 ]; then
  UNSEEN=bench/configs/unseen4.jsonl UNSEEN_TAG=unseen4 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
fi
if [ "$PART" = 4 ]; then
  for args in "--model gpt2 --schedule 1f1b --batch 8 --micro 4" "--model gpt2 --schedule gpipe --batch 8 --micro 4" \
      "--model gpt2-medium --schedule 1f1b --batch 16 --micro 8" "--model gpt2-medium --schedule gpipe --batch 16 --micro 8"; do
    torchrun --standalone --nproc-per-node 2 bench/pp_job.py $args --seq 512 2>>"$o/errors8-4.txt" |
        grep '^{' >> "$o/pp8.jsonl"
  done
  tail -c 8000 "$o/errors8-4.txt" > "$o/errors8-4-tail.txt"; rm -f "$o/errors8-4.txt"
fi
if [ "$PART" = 5 ]; then
  UNSEEN=bench/configs/repeat4.jsonl UNSEEN_TAG=repeat4 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
  rm -f "$o"/repeat4-?-tail.log "$o"/env-8.txt
fi
if [ "$PART" = 6 ]; then
  UNSEEN=bench/configs/unseen5.jsonl UNSEEN_TAG=unseen5 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
  tar -C "$o" -cJf /tmp/unseen5.tar.xz . && rm -f "$o"/* && mv /tmp/unseen5.tar.xz "$o"/
fi
if [ "$PART" = 7 ]; then
  # a sixth set (bench/configs/unseen6.jsonl: LoRA on five
  # architectures, GPT-2/OPT eager in half precision), written before it
  # was measured; and what Gemma's forward allocates before its first
  # layer (bench/embed_probe.py)
  for a in "gemma-2b bf16 4 2048" "gemma-2b amp-bf16 4 1024" "qwen2-0.5b bf16 4 2048"; do
    python3 bench/embed_probe.py $a >> "$o/embed-probe.txt" 2>&1
  done
  UNSEEN=bench/configs/unseen6.jsonl UNSEEN_TAG=unseen6 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
  tar -C "$o" -cJf /tmp/unseen6.tar.xz . && rm -f "$o"/* && mv /tmp/unseen6.tar.xz "$o"/
fi
if [ "$PART" = 8 ]; then
  # a seventh set (bench/configs/unseen7.jsonl), written after
  # the corrections and before it was measured, to judge them
  UNSEEN=bench/configs/unseen7.jsonl UNSEEN_TAG=unseen7 PART=8 bash bench/parallel_calibration_gpu.sh > /dev/null
  tar -C "$o" -cJf /tmp/unseen7.tar.xz . && rm -f "$o"/* && mv /tmp/unseen7.tar.xz "$o"/
fi
if [ "$PART" = 9 ]; then
  # does a gap between steps (a data loader's) settle
  # GPT-2 DDP's two peaks? Alternating runs without and with 0.3 s after
  # each step (NCCL's watchdog polls its work every 100 ms and lets go of
  # the tensors it keeps for the allocator's safety when it sees them done)
  for i in 1 2 3 4; do
    for p in 0 0.3; do
      torchrun --standalone --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp --pause $p 2>>"$o/errors8-9.txt" |
          grep '^{' >> "$o/ddp-pause.jsonl"
    done
  done
  tail -c 4000 "$o/errors8-9.txt" > "$o/errors8-9-tail.txt"; rm -f "$o/errors8-9.txt"
fi
ls -la "$o"
