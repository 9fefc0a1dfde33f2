#!/bin/bash
# Device runs of 2026-11-29, on the 2-GPU kind.
# PART=1: tensor parallelism (bench/tp_job.py: TinyLlama-1.1B's
#   and Qwen2-0.5B's shapes, TP 1 and 2, precisions, eager/SDPA,
#   checkpointing), one TP job under `vramledger run` (record, report,
#   doctor), DDP/FSDP on Qwen2-0.5B (1 and 2 GPUs) and TinyLlama (2 GPUs).
# PART=2: the whole calibration suite again, every configuration in
#   a process of its own (measure.py's default now), half on each GPU.
# PART=3: the caching allocator's histories of training runs, one
#   process each, two at a time (one per GPU), converted to traces here
#   (not run: no device time was left).
# PART=4: what is live at the peak (bench/peak_blocks.py) where the
#   estimate missed, and the TP job under `vramledger run`.
# PART=6: for a machine with several GPUs (not run yet): the
#   interposer fix under NCCL (bench/scatter_job.py and the TP job under
#   `vramledger run`, with the probe), GPT-2 DDP three times with its live set
#   at the peak (its peak differs between runs by one fp32 copy of the
#   parameters), and with NGPU=4 or 8 the DDP/FSDP/TP jobs on all GPUs.
# PART=7: see the block below.
# PART=8: configurations outside the calibration set.
# PART=9: allocator histories where the training replay misses.
# PART=10: GPT-2 DDP's two peaks with and without NCCL's
#   record_stream. (PART=8 takes UNSEEN=LIST UNSEEN_TAG=NAME.)
# Needs build-rel/ (carry). Results under $OUT in few files.
set -u
. bench/device_env.sh
mkdir -p "$o"
record_env "$o/env-$PART.txt"
tr="torchrun --standalone"
if [ "$PART" = 1 ]; then
  ll=bench/configs/tinyllama-1.1b.json qw=bench/configs/qwen2-0.5b-untied.json
  tp() { $tr --nproc-per-node "$@" 2>>"$o/errors-1.txt" | grep '^{' >> "$o/tp.jsonl"; }
  tp 1 bench/tp_job.py --config $ll
  tp 2 bench/tp_job.py --config $ll
  tp 2 bench/tp_job.py --config $ll --attention eager --batch 2
  tp 2 bench/tp_job.py --config $ll --checkpointing full --batch 8
  tp 2 bench/tp_job.py --config $ll --precision bf16
  tp 2 bench/tp_job.py --config $ll --precision fp32 --batch 2
  tp 1 bench/tp_job.py --config $qw
  tp 2 bench/tp_job.py --config $qw
  $vl run --quiet --out /tmp/tp-run -- $tr --nproc-per-node 2 bench/tp_job.py --config $ll \
      2>>"$o/errors-1.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/tp.jsonl"
  $vl report /tmp/tp-run --format json > "$o/tp-report.json" 2>>"$o/errors-1.txt"
  $vl doctor /tmp/tp-run --format json > "$o/tp-doctor.json" 2>>"$o/errors-1.txt"
  for mode in ${DP_MODES-ddp fsdp-full fsdp-grad-op}; do
    for n in 1 2; do
      $tr --nproc-per-node $n bench/multi_gpu_job.py --mode $mode --config data/models/qwen2-0.5b.json \
          --batch 4 --seq 1024 --steps 8 2>>"$o/errors-1.txt" | grep '^{' >> "$o/dp.jsonl"
    done
    $tr --nproc-per-node 2 bench/multi_gpu_job.py --mode $mode --config $ll --batch 4 --seq 1024 \
        --steps 8 2>>"$o/errors-1.txt" | grep '^{' >> "$o/dp.jsonl"
  done
  tail -c 30000 "$o/errors-1.txt" > "$o/errors-1-tail.txt"; rm -f "$o/errors-1.txt"
fi
if [ "$PART" = 2 ]; then
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
fi
if [ "$PART" = 3 ]; then
  export PYTHONPATH=$PWD/python
  rm -rf /tmp/hist3
  hist() { # GPU NAME...
    g=$1; shift
    for n in "$@"; do
      CUDA_VISIBLE_DEVICES=$g python3 bench/alloc_history.py /tmp/hist3 $n >> "$o/history-$g.txt" 2>>"$o/errors-3.txt"
      d=/tmp/hist3/$n
      python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
        $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-3.txt"
      xz -T4 $d/hist.trace; rm -f $d/hist.pickle
    done
  }
  hist 0 ${HIST_A:-gemma2b-amp-adamw-ckpt pythia14-amp-adamw-sdpa phi3-mixed-adamw-fused qwen05-amp-adamw-sdpa gpt2-amp-adamw-eager} &
  hist 1 ${HIST_B:-gpt2l-amp-adamw-ckpt phi3-amp-sgd-ckpt pythia160-ampfp16-adamw opt13-amp-adamw-fused gemma2b-bf16-adamw-fused} &
  wait
  tar -C /tmp/hist3 -cJf "$o/hist3.tar.xz" . 2>>"$o/errors-3.txt"
  ls -la "$o" /tmp/hist3/* >> "$o/history-ls.txt"
fi
if [ "$PART" = 4 ]; then
  # issue 8: what is live at the peak where the estimate misses (TP in fp32,
  # TP's vocabulary-parallel loss at world 1, FSDP on TinyLlama), with
  # controls that agree (TP amp, DDP); the TP job under `vramledger run`
  ll=bench/configs/tinyllama-1.1b.json qw=bench/configs/qwen2-0.5b-untied.json
  rm -rf /tmp/tp-run
  $vl run --quiet --out /tmp/tp-run -- $tr --nproc-per-node 2 bench/tp_job.py --config $ll \
      2>>"$o/errors-4.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/peaks.jsonl"
  $vl report /tmp/tp-run --format json > "$o/tp-report.json" 2>>"$o/errors-4.txt"
  $vl doctor /tmp/tp-run --format json > "$o/tp-doctor.json" 2>>"$o/errors-4.txt"
  run() { h=$1; shift; $tr "$@" --history /tmp/peaks/$h.json 2>>"$o/errors-4.txt" | grep '^{' >> "$o/peaks.jsonl"; }
  mkdir -p /tmp/peaks
  run tp2-fp32 --nproc-per-node 2 bench/tp_job.py --config $ll --precision fp32 --batch 2
  run tp1-qwen --nproc-per-node 1 bench/tp_job.py --config $qw
  run fsdp-full-ll --nproc-per-node 2 bench/multi_gpu_job.py --mode fsdp-full --config $ll --batch 4 --seq 1024 --steps 5
  run tp2-amp --nproc-per-node 2 bench/tp_job.py --config $ll
  run ddp-ll --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp --config $ll --batch 4 --seq 1024 --steps 5
  run fsdp-full-qw --nproc-per-node 2 bench/multi_gpu_job.py --mode fsdp-full --config data/models/qwen2-0.5b.json --batch 4 --seq 1024 --steps 5
  tar -C /tmp/peaks -cJf "$o/peaks.tar.xz" .
  tail -c 20000 "$o/errors-4.txt" > "$o/errors-4-tail.txt"; rm -f "$o/errors-4.txt"
fi
if [ "$PART" = 6 ]; then
  n=${NGPU:-2} ll=bench/configs/tinyllama-1.1b.json
  export PYTHONFAULTHANDLER=1
  rm -rf /tmp/r6 /tmp/peaks6; mkdir -p /tmp/r6 /tmp/peaks6
  $vl run --quiet --out /tmp/r6/scatter -- $tr --nproc-per-node $n bench/scatter_job.py \
      > "$o/scatter.txt" 2>&1; echo "rc $?" >> "$o/scatter.txt"
  $vl run --quiet --out /tmp/r6/tp -- $tr --nproc-per-node $n bench/tp_job.py --config $ll \
      2>>"$o/errors-6.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/runs6.jsonl"
  $vl report /tmp/r6/tp --format json > "$o/tp-report.json" 2>>"$o/errors-6.txt"
  $vl doctor /tmp/r6/tp --format json > "$o/tp-doctor.json" 2>>"$o/errors-6.txt"
  for i in 1 2 3; do
    $tr --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp --history /tmp/peaks6/ddp-gpt2-$i.json \
        2>>"$o/errors-6.txt" | grep '^{' >> "$o/runs6.jsonl"
  done
  if [ "$n" -gt 2 ]; then
    for mode in ddp fsdp-full fsdp-grad-op; do
      $tr --nproc-per-node $n bench/multi_gpu_job.py --mode $mode --config $ll --batch 4 --seq 1024 \
          --steps 8 2>>"$o/errors-6.txt" | grep '^{' >> "$o/runs6.jsonl"
    done
    $tr --nproc-per-node $n bench/tp_job.py --config $ll 2>>"$o/errors-6.txt" | grep '^{' >> "$o/runs6.jsonl"
  fi
  tar -C /tmp/peaks6 -cJf "$o/peaks6.tar.xz" .
  tail -c 20000 "$o/errors-6.txt" > "$o/errors-6-tail.txt"; rm -f "$o/errors-6.txt"
fi
if [ "$PART" = 7 ]; then
  # the probe on the TP job (it stopped itself on a tensor
  # subclass in an earlier run), GPT-2 DDP's two peaks with every rank's
  # history from before the model is built, the history that failed, and
  # how long `validate --quick` takes
  ll=bench/configs/tinyllama-1.1b.json
  export PYTHONFAULTHANDLER=1 PYTHONPATH=$PWD/python
  rm -rf /tmp/r7 /tmp/peaks7 /tmp/hist7 /tmp/vq; mkdir -p /tmp/r7 /tmp/peaks7
  $vl run --quiet --out /tmp/r7/tp -- $tr --nproc-per-node 2 bench/tp_job.py --config $ll \
      2>>"$o/errors-7.txt" | grep '^{' | sed 's/"mode": "tp"/"mode": "tp-under-vl-run"/' >> "$o/runs7.jsonl"
  $vl report /tmp/r7/tp --format json > /tmp/peaks7/tp-report.json 2>>"$o/errors-7.txt"
  $vl report /tmp/r7/tp > /tmp/peaks7/tp-report.txt 2>>"$o/errors-7.txt"
  $vl doctor /tmp/r7/tp --format json > /tmp/peaks7/tp-doctor.json 2>>"$o/errors-7.txt"
  for i in 1 2 3 4 5; do
    $tr --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp --history /tmp/peaks7/ddp-gpt2-$i.json \
        --history-all 2>>"$o/errors-7.txt" | grep '^{' >> "$o/runs7.jsonl"
  done
  CUDA_VISIBLE_DEVICES=0 python3 bench/alloc_history.py /tmp/hist7 gpt2l-amp-adamw-ckpt \
      >> "$o/runs7.jsonl" 2>>"$o/errors-7.txt"
  d=/tmp/hist7/gpt2l-amp-adamw-ckpt
  python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
    $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-7.txt"
  xz -T4 $d/hist.trace; rm -f $d/hist.pickle; cp -r $d /tmp/peaks7/
  t0=$(date +%s)
  CUDA_VISIBLE_DEVICES=0 timeout 300 $vl validate --quick --out /tmp/vq > /tmp/peaks7/validate-quick.txt 2>&1
  echo "validate --quick: rc $? in $(( $(date +%s) - t0 )) s" >> /tmp/peaks7/validate-quick.txt
  cp /tmp/vq/*.json /tmp/peaks7/ 2>/dev/null
  tar -C /tmp/peaks7 -cJf "$o/peaks7.tar.xz" .
  tail -c 20000 "$o/errors-7.txt" > "$o/errors-7-tail.txt"; rm -f "$o/errors-7.txt"
fi
if [ "$PART" = 8 ]; then
  # configurations outside the calibration set (new models and
  # shapes: bench/configs/unseen.jsonl), each in a process of its own, half
  # on each GPU, merged into one results file for `vramledger validate
  # --results` (every run a hold-out)
  export PYTHONPATH=$PWD/python
  list=${UNSEEN:-bench/configs/unseen.jsonl} tag=${UNSEEN_TAG:-unseen}
  rm -rf /tmp/u; mkdir -p /tmp/u
  one() { # GPU PARITY
    i=0
    while read -r line; do
      if [ $((i % 2)) = "$2" ]; then
        n=$(echo "$line" | python3 -c "import json,sys; print(json.load(sys.stdin)['name'])")
        cfg=$(echo "$line" | python3 -c "import json,sys; c=json.load(sys.stdin); c['holdout']=True; print(json.dumps(c))")
        CUDA_VISIBLE_DEVICES=$1 python3 python/vramledger/measure.py /tmp/u/$n.json --config "$cfg" </dev/null \
            >> "$o/$tag-$1.log" 2>&1
      fi
      i=$((i + 1))
    done < "$list"
  }
  t0=$(date +%s)
  one 0 0 & one 1 1 & wait
  echo "$(wc -l < "$list") configurations on 2 GPUs: $(( $(date +%s) - t0 )) s" > "$o/$tag-time.txt"
  python3 - "$o/$tag.json" "$list" /tmp/u/*.json <<'PY'
import json, sys
out, src, files = sys.argv[1], sys.argv[2], sys.argv[3:]
merged = None
for f in files:
    d = json.load(open(f))
    if merged is None:
        merged = dict(d, suite="outside the calibration set (%s)" % src, runs=[])
    merged["runs"] += d["runs"]
json.dump(merged, open(out, "w"), indent=1)
PY
  $vl validate --results "$o/$tag.json" > "$o/$tag-validate.txt" 2>&1
  for g in 0 1; do tail -c 8000 "$o/$tag-$g.log" > "$o/$tag-$g-tail.log"; rm -f "$o/$tag-$g.log"; done
fi
if [ "$PART" = 9 ]; then
  # the allocator's history of the unseen run the training replay
  # misses (Gemma-2B bf16 SGD, +12 %) and of a control, with every large
  # event and the Python line that made it (bench/peak_blocks.py)
  export PYTHONPATH=$PWD/python
  rm -rf /tmp/h9; mkdir -p /tmp/h9
  for n in ${HIST9:-u-gemma2b-bf16-sgd-b4s2048 gemma2b-bf16-adamw-fused}; do
    python3 bench/alloc_history.py /tmp/h9 $n >> "$o/history-9.txt" 2>>"$o/errors-9.txt"
    d=/tmp/h9/$n
    python3 -c "import pickle, json, sys; sys.path.insert(0, 'bench'); from peak_blocks import summary; json.dump(summary(pickle.load(open('$d/hist.pickle', 'rb'))), open('$d/large.json', 'w'), indent=1)" 2>>"$o/errors-9.txt"
    python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
      $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-9.txt"
    xz -T4 $d/hist.trace; rm -f $d/hist.pickle
  done
  tar -C /tmp/h9 -cJf "$o/hist9.tar.xz" .
fi
if [ "$PART" = 10 ]; then
  # GPT-2 DDP's two peaks (DDP's first buckets freed at the
  # rebuild or only in the second backward): four runs as they are and four
  # with NCCL's record_stream off (TORCH_NCCL_AVOID_RECORD_STREAMS=1)
  for i in 1 2 3 4; do
    $tr --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp 2>>"$o/errors-10.txt" |
        grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-default"/' >> "$o/ddp10.jsonl"
    TORCH_NCCL_AVOID_RECORD_STREAMS=1 $tr --nproc-per-node 2 bench/multi_gpu_job.py --mode ddp \
        2>>"$o/errors-10.txt" | grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-avoid-record-streams"/' >> "$o/ddp10.jsonl"
  done
  tail -c 8000 "$o/errors-10.txt" > "$o/errors-10-tail.txt"; rm -f "$o/errors-10.txt"
fi
ls -la "$o"
