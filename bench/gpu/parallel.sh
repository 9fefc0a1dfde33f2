#!/bin/bash
# How close is the estimate on tensor, data and pipeline parallel jobs (2 or more GPUs)?
#   bench/gpu/run.sh parallel NAME, NAME one of:
# tp-dp: tensor parallelism (bench/gpu/jobs/parallel_jobs.py tensor: TinyLlama-1.1B's
#   and Qwen2-0.5B's shapes, TP 1 and 2, precisions, eager/SDPA,
#   checkpointing), one TP job under `vramledger run` (record, report,
#   doctor), DDP/FSDP on Qwen2-0.5B (1 and 2 GPUs) and TinyLlama (2 GPUs)
#   (bench/results/parallel-calibration/).
# peaks: what is live at the peak (bench/gpu/jobs/job_common.py summary()) where the
#   estimate missed, and the TP job under `vramledger run`.
# nccl: the interposer under NCCL (bench/gpu/jobs/workloads.py scatter and the TP
#   job under `vramledger run`, with the probe), GPT-2 DDP three times with
#   its live set at the peak (its peak differs between runs by one fp32 copy
#   of the parameters), and with NGPU=4 or 8 the DDP/FSDP/TP jobs on all
#   GPUs (bench/results/nccl-run/raw.jsonl:nccl-interposer/).
# tp-probe: the probe on the TP job, GPT-2 DDP's two peaks with every rank's
#   history from before the model is built, one allocator history, and how
#   long `validate --quick` takes (bench/results/nccl-run/raw.jsonl:probe-tp-ddp/).
# pp: pipeline parallelism (bench/gpu/jobs/parallel_jobs.py pipeline: GPT-2 and GPT-2
#   medium over 2 stages, 1F1B and GPipe; bench/results/unseen-sets/).
# Needs build-rel/ (carry). Results under $OUT.
set -u
. bench/gpu/env.sh
what=${1:?usage: bench/gpu/run.sh parallel tp-dp|peaks|nccl|tp-probe|pp}
case $what in
  tp-dp|peaks|nccl|tp-probe|pp) ;;
  *) echo "bench/gpu/run.sh parallel: no run '$what' (tp-dp|peaks|nccl|tp-probe|pp)" >&2; exit 2 ;;
esac
mkdir -p "$o"
record_env "$o/env-$what.txt"
tr="torchrun --standalone"
if [ "$what" = tp-dp ]; then
  ll=bench/configs/tinyllama-1.1b.json qw=bench/configs/qwen2-0.5b-untied.json
  tp() { $tr --nproc-per-node "$@" 2>>"$o/errors-tp-dp.txt" | grep '^{' >> "$o/tp.jsonl"; }
  tp 1 bench/gpu/jobs/parallel_jobs.py tensor --config $ll
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll --attention eager --batch 2
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll --checkpointing full --batch 8
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll --precision bf16
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll --precision fp32 --batch 2
  tp 1 bench/gpu/jobs/parallel_jobs.py tensor --config $qw
  tp 2 bench/gpu/jobs/parallel_jobs.py tensor --config $qw
  $vl run --quiet --out /tmp/tp-run -- $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll \
      2>>"$o/errors-tp-dp.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/tp.jsonl"
  $vl report /tmp/tp-run --format json > "$o/tp-report.json" 2>>"$o/errors-tp-dp.txt"
  $vl doctor /tmp/tp-run --format json > "$o/tp-doctor.json" 2>>"$o/errors-tp-dp.txt"
  for mode in ${DP_MODES-ddp fsdp-full fsdp-grad-op}; do
    for n in 1 2; do
      $tr --nproc-per-node $n bench/gpu/jobs/parallel_jobs.py data --mode $mode --config data/models/qwen2-0.5b.json \
          --batch 4 --seq 1024 --steps 8 2>>"$o/errors-tp-dp.txt" | grep '^{' >> "$o/dp.jsonl"
    done
    $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode $mode --config $ll --batch 4 --seq 1024 \
        --steps 8 2>>"$o/errors-tp-dp.txt" | grep '^{' >> "$o/dp.jsonl"
  done
  tail -c 30000 "$o/errors-tp-dp.txt" > "$o/errors-tp-dp-tail.txt"; rm -f "$o/errors-tp-dp.txt"
fi
if [ "$what" = peaks ]; then
  # what is live at the peak where the estimate misses (TP in fp32,
  # TP's vocabulary-parallel loss at world 1, FSDP on TinyLlama), with
  # controls that agree (TP amp, DDP); the TP job under `vramledger run`
  ll=bench/configs/tinyllama-1.1b.json qw=bench/configs/qwen2-0.5b-untied.json
  rm -rf /tmp/tp-run
  $vl run --quiet --out /tmp/tp-run -- $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll \
      2>>"$o/errors-peaks.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/peaks.jsonl"
  $vl report /tmp/tp-run --format json > "$o/tp-report.json" 2>>"$o/errors-peaks.txt"
  $vl doctor /tmp/tp-run --format json > "$o/tp-doctor.json" 2>>"$o/errors-peaks.txt"
  run() { h=$1; shift; $tr "$@" --history /tmp/peaks/$h.json 2>>"$o/errors-peaks.txt" | grep '^{' >> "$o/peaks.jsonl"; }
  mkdir -p /tmp/peaks
  run tp2-fp32 --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll --precision fp32 --batch 2
  run tp1-qwen --nproc-per-node 1 bench/gpu/jobs/parallel_jobs.py tensor --config $qw
  run fsdp-full-ll --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode fsdp-full --config $ll --batch 4 --seq 1024 --steps 5
  run tp2-amp --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll
  run ddp-ll --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp --config $ll --batch 4 --seq 1024 --steps 5
  run fsdp-full-qw --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode fsdp-full --config data/models/qwen2-0.5b.json --batch 4 --seq 1024 --steps 5
  tar -C /tmp/peaks -cJf "$o/peaks.tar.xz" .
  tail -c 20000 "$o/errors-peaks.txt" > "$o/errors-peaks-tail.txt"; rm -f "$o/errors-peaks.txt"
fi
if [ "$what" = nccl ]; then
  n=${NGPU:-2} ll=bench/configs/tinyllama-1.1b.json
  export PYTHONFAULTHANDLER=1
  rm -rf /tmp/r6 /tmp/peaks6; mkdir -p /tmp/r6 /tmp/peaks6
  $vl run --quiet --out /tmp/r6/scatter -- $tr --nproc-per-node $n bench/gpu/jobs/workloads.py scatter \
      > "$o/scatter.txt" 2>&1; echo "rc $?" >> "$o/scatter.txt"
  $vl run --quiet --out /tmp/r6/tp -- $tr --nproc-per-node $n bench/gpu/jobs/parallel_jobs.py tensor --config $ll \
      2>>"$o/errors-nccl.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/runs6.jsonl"
  $vl report /tmp/r6/tp --format json > "$o/tp-report.json" 2>>"$o/errors-nccl.txt"
  $vl doctor /tmp/r6/tp --format json > "$o/tp-doctor.json" 2>>"$o/errors-nccl.txt"
  for i in 1 2 3; do
    $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp --history /tmp/peaks6/ddp-gpt2-$i.json \
        2>>"$o/errors-nccl.txt" | grep '^{' >> "$o/runs6.jsonl"
  done
  if [ "$n" -gt 2 ]; then
    for mode in ddp fsdp-full fsdp-grad-op; do
      $tr --nproc-per-node $n bench/gpu/jobs/parallel_jobs.py data --mode $mode --config $ll --batch 4 --seq 1024 \
          --steps 8 2>>"$o/errors-nccl.txt" | grep '^{' >> "$o/runs6.jsonl"
    done
    $tr --nproc-per-node $n bench/gpu/jobs/parallel_jobs.py tensor --config $ll 2>>"$o/errors-nccl.txt" | grep '^{' >> "$o/runs6.jsonl"
  fi
  tar -C /tmp/peaks6 -cJf "$o/peaks6.tar.xz" .
  tail -c 20000 "$o/errors-nccl.txt" > "$o/errors-nccl-tail.txt"; rm -f "$o/errors-nccl.txt"
fi
if [ "$what" = tp-probe ]; then
  # the probe on the TP job (it stopped itself on a tensor
  # subclass in an earlier run), GPT-2 DDP's two peaks with every rank's
  # history from before the model is built, the history that failed, and
  # how long `validate --quick` takes
  ll=bench/configs/tinyllama-1.1b.json
  export PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD/python
  rm -rf /tmp/r7 /tmp/peaks7 /tmp/hist7 /tmp/vq; mkdir -p /tmp/r7 /tmp/peaks7
  $vl run --quiet --out /tmp/r7/tp -- $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config $ll \
      2>>"$o/errors-tp-probe.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/runs7.jsonl"
  $vl report /tmp/r7/tp --format json > /tmp/peaks7/tp-report.json 2>>"$o/errors-tp-probe.txt"
  $vl report /tmp/r7/tp > /tmp/peaks7/tp-report.txt 2>>"$o/errors-tp-probe.txt"
  $vl doctor /tmp/r7/tp --format json > /tmp/peaks7/tp-doctor.json 2>>"$o/errors-tp-probe.txt"
  for i in 1 2 3 4 5; do
    $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp --history /tmp/peaks7/ddp-gpt2-$i.json \
        --history-all 2>>"$o/errors-tp-probe.txt" | grep '^{' >> "$o/runs7.jsonl"
  done
  CUDA_VISIBLE_DEVICES=0 python3 bench/gpu/jobs/tracer_checks.py history /tmp/hist7 gpt2l-amp-adamw-ckpt \
      >> "$o/runs7.jsonl" 2>>"$o/errors-tp-probe.txt"
  d=/tmp/hist7/gpt2l-amp-adamw-ckpt
  python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
    $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-tp-probe.txt"
  xz -T4 $d/hist.trace; rm -f $d/hist.pickle; cp -r $d /tmp/peaks7/
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout 300 $vl validate --quick --out /tmp/vq > /tmp/peaks7/validate-quick.txt 2>&1
  echo "validate --quick: rc $? in $(( $(date +%s) - t0 )) s" >> /tmp/peaks7/validate-quick.txt
  cp /tmp/vq/*.json /tmp/peaks7/ 2>/dev/null
  tar -C /tmp/peaks7 -cJf "$o/peaks7.tar.xz" .
  tail -c 20000 "$o/errors-tp-probe.txt" > "$o/errors-tp-probe-tail.txt"; rm -f "$o/errors-tp-probe.txt"
fi
if [ "$what" = pp ]; then
  for args in "--model gpt2 --schedule 1f1b --batch 8 --micro 4" "--model gpt2 --schedule gpipe --batch 8 --micro 4" \
      "--model gpt2-medium --schedule 1f1b --batch 16 --micro 8" "--model gpt2-medium --schedule gpipe --batch 16 --micro 8"; do
    torchrun --standalone --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py pipeline $args --seq 512 2>>"$o/errors-pp.txt" |
        grep '^{' >> "$o/pp.jsonl"
  done
  tail -c 8000 "$o/errors-pp.txt" > "$o/errors-pp-tail.txt"; rm -f "$o/errors-pp.txt"
fi
ls -la "$o"
