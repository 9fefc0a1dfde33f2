#!/bin/bash
# Device runs of 2026-11-30.
# PART=1 (two GPUs): DDP's bucket rebuild, trial by trial
#   (bench/ddp_rebuild_trials.py): GPT-2 with a synchronizing loop and
#   0/20/50/100 ms after each step, a loop that only copies its batch from
#   the host, and an asynchronous one; the same with
#   TORCH_NCCL_AVOID_RECORD_STREAMS=0; Qwen2-0.5B; then whole jobs
#   (bench/multi_gpu_job.py) with an asynchronous loop, for the estimate.
# PART=2 (two GPUs): GPT-2 DDP under `vramledger run` (doctor VL-D015 on
#   real records) and whole jobs with 0.1 s once after the first step.
# PART=3 (two GPUs): pipeline stages and FSDP under `vramledger run`
#   (every rank's bill side by side in report), and the cost of `run` on a
#   DDP step: GPT-2, 40 steps, 4 runs with and 4 without, alternating.
# PART=4 (two GPUs): GPipe's stages over-estimated (+5 to +9 %):
#   every rank's live set at its peak, GPT-2 GPipe and 1F1B, 4 micro-batches.
# PART=5 (two GPUs): four pipeline runs the GPipe correction did not
#   see (pp-predictions.txt written before), to judge it.
# PART=6 (two GPUs): PyTorch's ZeRO-1 (DDP + ZeroRedundancyOptimizer),
#   GPT-2 and Qwen2-0.5B, three runs each (zero1-predictions.txt written before).
# PART=7 (two GPUs): four DDP/ZeRO-1 jobs the DDP replay did not see
#   (ddp-replay-predictions.txt written before), to judge it.
# Needs build-rel/ (carry). Results under $OUT in few files.
set -u
. bench/device_env.sh
mkdir -p "$o"
record_env "$o/env10-$PART.txt"
tr="torchrun --standalone --nproc-per-node 2"
if [ "$PART" = 1 ]; then
  t0=$(date +%s)
  timeout 240 $tr bench/ddp_rebuild_trials.py --trials ${TRIALS:-16} \
      --loops sync:0,sync:0.02,sync:0.05,sync:0.1,host:0,async:0 \
      2>>"$o/errors10-1.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "gpt2 trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  TORCH_NCCL_AVOID_RECORD_STREAMS=0 timeout 90 $tr bench/ddp_rebuild_trials.py \
      --trials ${TRIALS2:-10} --loops sync:0,async:0 --tag TORCH_NCCL_AVOID_RECORD_STREAMS=0 \
      2>>"$o/errors10-1.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "env trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  timeout 120 $tr bench/ddp_rebuild_trials.py --config data/models/qwen2-0.5b.json \
      --trials ${TRIALS3:-6} --loops sync:0,host:0,async:0 \
      2>>"$o/errors10-1.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "qwen trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  for i in 1 2 3; do
    timeout 60 $tr bench/multi_gpu_job.py --mode ddp --async-loop 2>>"$o/errors10-1.txt" |
        grep '^{' >> "$o/jobs.jsonl"
    timeout 60 $tr bench/multi_gpu_job.py --mode ddp --async-loop --config data/models/qwen2-0.5b.json \
        2>>"$o/errors10-1.txt" | grep '^{' >> "$o/jobs.jsonl"
  done
  echo "jobs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors10-1.txt" > "$o/errors10-1-tail.txt"; rm -f "$o/errors10-1.txt"
fi
if [ "$PART" = 2 ]; then
  # issue 8: GPT-2 DDP under `vramledger run` (every rank's probe; doctor's
  # VL-D015 on real records), then whole jobs with 0.1 s once after the
  # first step (the finding's fix)
  t0=$(date +%s)
  for i in 1 2 3 4; do
    rm -rf /tmp/ddp-run$i
    timeout 90 $vl run --quiet --out /tmp/ddp-run$i -- $tr bench/multi_gpu_job.py --mode ddp --steps 6 \
        2>>"$o/errors10-2.txt" | grep '^{' >> "$o/ddp-vl-run.jsonl"
    $vl doctor /tmp/ddp-run$i --format json > /tmp/ddp-run$i/doctor.json 2>>"$o/errors10-2.txt"
    $vl report /tmp/ddp-run$i --format json > /tmp/ddp-run$i/report.json 2>>"$o/errors10-2.txt"
  done
  echo "vl runs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tar cJf "$o/ddp-runs.tar.xz" -C /tmp ddp-run1 ddp-run2 ddp-run3 ddp-run4
  for i in 1 2 3 4; do
    timeout 60 $tr bench/multi_gpu_job.py --mode ddp --pause-first 0.1 2>>"$o/errors10-2.txt" |
        grep '^{' >> "$o/jobs-pause-first.jsonl"
  done
  echo "pause-first jobs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors10-2.txt" > "$o/errors10-2-tail.txt"; rm -f "$o/errors10-2.txt"
fi
if [ "$PART" = 3 ]; then
  t0=$(date +%s)
  for job in "pp bench/pp_job.py --steps 6" "fsdp bench/multi_gpu_job.py --mode fsdp-full --steps 6" \
             "zero2 bench/multi_gpu_job.py --mode fsdp-grad-op --steps 6"; do
    set -- $job; name=$1; shift
    rm -rf /tmp/run-$name
    timeout 120 $vl run --quiet --out /tmp/run-$name -- $tr "$@" 2>>"$o/errors10-3.txt" |
        grep '^{' | sed "s/^{/{\"under\": \"vl run $name\", /" >> "$o/under-run.jsonl"
    $vl report /tmp/run-$name > /tmp/run-$name/report.txt 2>>"$o/errors10-3.txt"
    $vl report /tmp/run-$name --format json > /tmp/run-$name/report.json 2>>"$o/errors10-3.txt"
    $vl doctor /tmp/run-$name --format json > /tmp/run-$name/doctor.json 2>>"$o/errors10-3.txt"
  done
  tar cJf "$o/runs.tar.xz" -C /tmp run-pp run-fsdp run-zero2
  echo "under run $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  for i in 1 2 3 4; do
    timeout 90 $tr bench/multi_gpu_job.py --mode ddp --steps 40 2>>"$o/errors10-3.txt" |
        grep '^{' | sed 's/^{/{"under": "bare", /' >> "$o/overhead.jsonl"
    rm -rf /tmp/ovh
    timeout 90 $vl run --quiet --out /tmp/ovh -- $tr bench/multi_gpu_job.py --mode ddp --steps 40 \
        2>>"$o/errors10-3.txt" | grep '^{' | sed 's/^{/{"under": "vl run", /' >> "$o/overhead.jsonl"
  done
  echo "overhead $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors10-3.txt" > "$o/errors10-3-tail.txt"; rm -f "$o/errors10-3.txt"
fi
if [ "$PART" = 4 ]; then
  mkdir -p /tmp/pph
  for sch in gpipe 1f1b; do
    timeout 120 $tr bench/pp_job.py --schedule $sch --steps 4 --history /tmp/pph/pp-$sch.json \
        2>>"$o/errors10-4.txt" | grep '^{' >> "$o/pp-hist.jsonl"
  done
  tar cJf "$o/pp-histories.tar.xz" -C /tmp pph
  tail -c 20000 "$o/errors10-4.txt" > "$o/errors10-4-tail.txt"; rm -f "$o/errors10-4.txt"
fi
if [ "$PART" = 5 ]; then
  while read -r m sch b mic seq; do
    timeout 120 $tr bench/pp_job.py --model "$m" --schedule "$sch" --batch "$b" --micro "$mic" \
        --seq "$seq" --steps 4 2>>"$o/errors10-5.txt" | grep '^{' >> "$o/pp5.jsonl"
  done <<'RUNS'
gpt2-medium gpipe 8 4 512
gpt2 gpipe 16 8 256
gpt2 1f1b 16 8 256
gpt2-medium 1f1b 8 4 1024
RUNS
  tail -c 20000 "$o/errors10-5.txt" > "$o/errors10-5-tail.txt"; rm -f "$o/errors10-5.txt"
fi
if [ "$PART" = 6 ]; then
  for i in 1 2 3; do
    timeout 90 $tr bench/multi_gpu_job.py --mode zero1 2>>"$o/errors10-6.txt" | grep '^{' >> "$o/zero1.jsonl"
    timeout 90 $tr bench/multi_gpu_job.py --mode zero1 --config data/models/qwen2-0.5b.json \
        2>>"$o/errors10-6.txt" | grep '^{' >> "$o/zero1.jsonl"
  done
  tail -c 20000 "$o/errors10-6.txt" > "$o/errors10-6-tail.txt"; rm -f "$o/errors10-6.txt"
fi
if [ "$PART" = 7 ]; then
  while read -r mode m b s rest; do
    # shellcheck disable=SC2086
    timeout 100 $tr bench/multi_gpu_job.py --mode "$mode" $rest --batch "$b" --seq "$s" \
        2>>"$o/errors10-7.txt" | grep '^{' >> "$o/ddp-replay-unseen.jsonl"
  done <<'RUNS'
ddp gpt2-medium 4 1024 --model gpt2-medium
ddp tinyllama-1.1b 2 1024 --config bench/configs/tinyllama-1.1b.json
zero1 qwen2-0.5b 8 512 --config data/models/qwen2-0.5b.json
zero1 gpt2 8 1024 --model gpt2
RUNS
  tail -c 20000 "$o/errors10-7.txt" > "$o/errors10-7-tail.txt"; rm -f "$o/errors10-7.txt"
fi
