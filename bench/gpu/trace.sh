#!/bin/bash
# The allocator model's question (bench/results/trace/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_trace).
#
# suite trace: Does the allocator model replay the allocator's own history exactly, and how close is a CPU dry run to the GPU?
#   bench/gpu/run.sh trace
# GPU evidence for the allocation replay and a real `vramledger
# sweep` of two models, on the H200, in one device call.
# Needs build-rel/ (carry). For every configuration of bench/gpu/jobs/tracer_checks.py trace:
#   1. the job on the GPU under `vramledger trace` (the tracer on CUDA), with
#      the caching allocator's own history recorded (--history): its
#      max_memory_allocated/reserved are the measurement;
#   2. the history as a trace (python3 -m vramledger.history), replayed:
#      the allocator model against the allocator (exactness);
#   3. the same job on the CPU under `vramledger trace` (the GPU hidden):
#      the prediction.
# Meanwhile two sweeps run (GPT-2 eager, Llama-shaped SDPA; 12 points each).
# Writes $OUT/summary.jsonl (one line per configuration), $OUT/env.txt,
# $OUT/details.tar.xz (every JSON, log and history trace), $OUT/sweeps.tar.xz.
#
# suite trace-meta: How close is a dry run on meta tensors to the H200, and how long does a 70B shape take?
#   bench/gpu/run.sh trace-meta
# Evidence for dry runs on meta tensors: the configurations of
# bench/gpu/trace.sh that meta can run (no autocast on meta), traced with
# the job on meta tensors; compared with the H200 measurements of
# bench/results/trace/ (same script, same versions). And
# Llama-2-70B's shape, bf16, on meta: what no CPU could hold. Needs
# build-rel/ (carry). Writes $OUT/meta.jsonl and $OUT/meta.tar.xz.
#
# suite trace-batch: How close is a dry run at one micro-batch replayed at others (`trace --batch`) to the H200?
#   bench/gpu/run.sh trace-batch
# GPU evidence for `vramledger trace --batch`: a CPU dry run at
# one micro-batch, replayed at others, against the same job measured on the
# H200 at those batches. Needs build-rel/ (carry). Writes $OUT/batch.jsonl
# (one line per configuration: the dry run's replays and the GPU's
# max_memory_allocated/reserved at each batch) and $OUT/batch.tar.xz.
#
# suite histories: Does the allocator model replay the caching allocator's own history of a run to the byte, and what is live at its peak?
#   bench/gpu/run.sh histories NAME...
# NAME: a run of measure.py's suites or of bench/configs/unseen*.jsonl.
# Each is measured by bench/gpu/jobs/tracer_checks.py history with PyTorch's
# allocation history on (one process each; the names alternate over GPUs 0
# and 1 when two are visible); its large events and the Python lines that
# made them summarised by bench/gpu/jobs/job_common.py summary() (large.json); the
# history converted to a trace (python3 -m vramledger.history) and replayed
# by `vramledger trace --replay`. Writes $OUT/histories.tar.xz (every run's
# directory, without the pickles) and $OUT/history-GPU.txt. Histories so
# far: bench/results/generate-reserve/, nccl-run/, unseen-sets/,
# replay-histories/. Needs build-rel/ (carry).

suite_trace() {
set -u
. bench/gpu/env.sh
export PYTHONPATH=$PWD/python
W=/tmp/w
rm -rf $W; mkdir -p $W
LIMIT=${LIMIT:-520}
# GPU_ONLY: the configurations run on the GPU ("all", or names); NO_HISTORY:
# those run without the allocator history; KEEP_PICKLE: whose snapshot is kept
GPU_ONLY=${GPU_ONLY:-all} NO_HISTORY=${NO_HISTORY:-} KEEP_PICKLE=${KEEP_PICKLE:-}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)"
  lscpu | grep 'Model name'; date -u; } > "$o/env.txt" 2>&1

CONFIGS="gpt2-fp32|--model gpt2 --precision fp32
gpt2-amp|--model gpt2 --precision amp-bf16
gpt2-bf16|--model gpt2 --precision bf16
gpt2-amp-eager|--model gpt2 --precision amp-bf16 --attn eager
gpt2-amp-ckpt|--model gpt2 --precision amp-bf16 --ckpt --seq 512
gpt2-amp-lora|--model gpt2 --precision amp-bf16 --lora 16 --seq 512
gpt2-fp32-sgd|--model gpt2 --precision fp32 --opt sgd --batch 8
gpt2-amp-fused|--model gpt2 --precision amp-bf16 --opt adamw-fused --batch 8
gpt2-fp32-loop|--model gpt2 --precision fp32 --opt adamw-loop
llama-amp|--model llama --precision amp-bf16
llama-bf16-ckpt|--model llama --precision bf16 --ckpt --seq 512
llama-fp32|--model llama --precision fp32 --batch 2
bert-amp|--model bert --precision amp-bf16 --batch 8
bert-fp32-adam|--model bert --precision fp32 --opt adam
mlp-fp32|--model mlp --precision fp32 --batch 256
mlp-amp|--model mlp --precision amp-bf16 --batch 256
mlp-bf16-ckpt|--model mlp --precision bf16 --ckpt --batch 512
conv-fp32-sgd|--model conv --precision fp32 --opt sgd --batch 64"

gpu_one() { # NAME ARGS...: steps 1 and 2
  name=$1; shift; d=$W/$name; mkdir -p $d
  case " $GPU_ONLY " in *" all "*|*" $name "*) ;; *) return ;; esac
  hist="--history $d/hist.pickle"
  case " $NO_HISTORY " in *" $name "*) hist="" ;; esac
  $vl trace --out $d/gpu-run --format json -- python3 bench/gpu/jobs/tracer_checks.py trace --device cuda --steps 2 \
      $hist "$@" > $d/gpu-trace.json 2> $d/gpu.log
  grep '^{"device"' $d/gpu.log > $d/job.json
  [ -n "$hist" ] && python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
    $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>> $d/hist.info
  case " $KEEP_PICKLE " in *" $name "*) ;; *) rm -f $d/hist.pickle ;; esac
  xz -T2 $d/hist.trace; xz -T2 $d/gpu-run/alloc.trace
}
cpu_one() { # NAME ARGS...: step 3
  name=$1; shift; d=$W/$name; mkdir -p $d
  CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=4 $vl trace --out $d/cpu-run --format json -- \
      python3 bench/gpu/jobs/tracer_checks.py trace --device cpu --steps 2 "$@" > $d/cpu-trace.json 2> $d/cpu.log
  grep '^{"device"' $d/cpu.log > $d/cpujob.json
  xz -T1 $d/cpu-run/alloc.trace
}

(
  echo "$CONFIGS" | while IFS='|' read -r name args; do gpu_one $name $args; done
  echo gpu-done > $W/gpu.done
) &
(
  n=0
  while IFS='|' read -r name args; do
    if [ $n -ge ${CPU_JOBS:-3} ]; then wait -n; n=$((n - 1)); fi
    cpu_one $name $args &
    n=$((n + 1))
  done <<< "$CONFIGS"
  wait
  echo cpu-done > $W/cpu.done
) &
if [ "${SWEEPS:-1}" = 1 ]; then
  ( $vl sweep --grid batch=1,2,4,8 --grid seq=256,512,1024 --out $W/sweep-gpt2 -- \
      python3 bench/gpu/jobs/sweep_jobs.py point --batch {batch} --seq {seq} > $W/sweep-gpt2.txt 2>&1
    $vl sweep --grid batch=1,2,4,8 --grid seq=256,512,1024 --out $W/sweep-llama -- \
      python3 bench/gpu/jobs/sweep_jobs.py point --model llama --batch {batch} --seq {seq} > $W/sweep-llama.txt 2>&1 ) &
fi
t=0
while [ $t -lt $LIMIT ]; do
  [ -f $W/gpu.done ] && [ -f $W/cpu.done ] && [ -z "$(jobs -r)" ] && break
  sleep 5; t=$((t + 5))
done
echo "waited $t s" >> "$o/env.txt"
python3 - "$W" "$CONFIGS" > "$o/summary.jsonl" <<'PY'
import json, os, sys
W, configs = sys.argv[1], sys.argv[2]
def load(p):
    try:
        with open(p) as f:
            t = f.read().strip().splitlines()
        return json.loads(t[-1]) if t else None
    except Exception as e:
        return {"error": str(e)}
for line in configs.splitlines():
    name, args = line.split("|", 1)
    d = os.path.join(W, name)
    print(json.dumps({"name": name, "args": args, "job": load(d + "/job.json"),
                      "history": load(d + "/hist.info"), "history_replay": load(d + "/hist-replay.json"),
                      "gpu_trace": load(d + "/gpu-trace.json"), "cpu_trace": load(d + "/cpu-trace.json"),
                      "cpu_job": load(d + "/cpujob.json")}))
PY
cd $W && tar cJf "$o/details.tar.xz" --exclude='sweep-*' --exclude='record.jsonl' . 2>/dev/null
tar cJf "$o/sweeps.tar.xz" sweep-* 2>/dev/null
ls -la "$o"
}

suite_trace_meta() {
set -u
. bench/gpu/env.sh
export PYTHONPATH=$PWD/python CUDA_VISIBLE_DEVICES=
W=/tmp/wm
rm -rf $W; mkdir -p $W
CONFIGS=${META_CONFIGS:-"gpt2-fp32|--model gpt2 --precision fp32
gpt2-bf16|--model gpt2 --precision bf16
gpt2-fp32-sgd|--model gpt2 --precision fp32 --opt sgd --batch 8
gpt2-fp32-loop|--model gpt2 --precision fp32 --opt adamw-loop
llama-fp32|--model llama --precision fp32 --batch 2
llama-bf16-ckpt|--model llama --precision bf16 --ckpt --seq 512
bert-fp32-adam|--model bert --precision fp32 --opt adam
mlp-fp32|--model mlp --precision fp32 --batch 256
mlp-bf16-ckpt|--model mlp --precision bf16 --ckpt --batch 512
llama70b-bf16-ckpt|--model llama70b --precision bf16 --ckpt --batch 1 --seq 4096"}
n=0
while IFS='|' read -r name args; do
  if [ $n -ge 5 ]; then wait -n; n=$((n - 1)); fi
  ( s=$(date +%s.%N)
    OMP_NUM_THREADS=2 timeout 300 $vl trace --out $W/$name --format json ${META_GPU:---gpu h200} -- \
        python3 bench/gpu/jobs/tracer_checks.py trace --device meta --steps 2 $args > $W/$name.json 2> $W/$name.log
    echo "$s $(date +%s.%N)" > $W/$name.time ) &
  n=$((n + 1))
done <<< "$CONFIGS"
wait
python3 - "$W" "$CONFIGS" > $o/meta.jsonl <<'PY'
import json, sys
W, configs = sys.argv[1], sys.argv[2]
for line in configs.splitlines():
    name, args = line.split("|")
    try:
        r = json.loads(open("%s/%s.json" % (W, name)).read())
    except Exception as e:
        r = {"error": str(e)}
    t0, t1 = (float(x) for x in open("%s/%s.time" % (W, name)).read().split())
    print(json.dumps({"name": name, "args": args, "seconds": round(t1 - t0, 1), "trace": r}))
PY
cd $W && for d in */; do xz -T2 $d/alloc.trace 2>/dev/null; rm -f $d/record.jsonl; done
tar cJf $o/meta.tar.xz . 2>/dev/null
ls -la $o
}

suite_trace_batch() {
set -u
. bench/gpu/env.sh
export PYTHONPATH=$PWD/python
W=/tmp/wb
rm -rf $W; mkdir -p $W
# NAME|BATCHES (the first is traced)|ARGS
CONFIGS="gpt2-amp|3,6,12|--model gpt2 --precision amp-bf16 --seq 200
gpt2-amp-eager|3,6,12|--model gpt2 --precision amp-bf16 --attn eager --seq 200
gpt2-fp32-sgd|3,6,12|--model gpt2 --precision fp32 --opt sgd --seq 200
llama-amp|3,6,12|--model llama --precision amp-bf16 --seq 200
bert-fp32-adam|3,6,12|--model bert --precision fp32 --opt adam --seq 200
mlp-fp32|33,66,132|--model mlp --precision fp32
mlp-amp-ckpt|33,66,132|--model mlp --precision amp-bf16 --ckpt"
(
  while IFS='|' read -r name batches args; do
    for b in ${batches//,/ }; do
      python3 bench/gpu/jobs/tracer_checks.py trace --device cuda --steps 2 --batch $b $args 2>/dev/null | tail -1 > $W/$name-gpu-$b.json
    done
  done <<< "$CONFIGS"
  touch $W/gpu.done
) &
(
  n=0
  while IFS='|' read -r name batches args; do
    first=${batches%%,*} rest=${batches#*,}
    if [ $n -ge 4 ]; then wait -n; n=$((n - 1)); fi
    CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=4 $vl trace --out $W/$name-cpu --format json --batch $rest -- \
        python3 bench/gpu/jobs/tracer_checks.py trace --device cpu --steps 2 --batch $first $args > $W/$name-cpu.json 2> $W/$name-cpu.log &
    n=$((n + 1))
  done <<< "$CONFIGS"
  wait
  touch $W/cpu.done
) &
t=0
while [ $t -lt ${LIMIT:-400} ] && ! { [ -f $W/gpu.done ] && [ -f $W/cpu.done ]; }; do sleep 5; t=$((t + 5)); done
echo "waited $t s" > $o/env.txt
python3 - "$W" "$CONFIGS" > $o/batch.jsonl <<'PY'
import json, sys
W, configs = sys.argv[1], sys.argv[2]
def load(p):
    try:
        return json.loads(open(p).read())
    except Exception as e:
        return {"error": str(e)}
for line in configs.splitlines():
    name, batches, args = line.split("|")
    gpu = {b: load("%s/%s-gpu-%s.json" % (W, name, b)) for b in batches.split(",")}
    print(json.dumps({"name": name, "args": args, "gpu": gpu, "cpu": load("%s/%s-cpu.json" % (W, name))}))
PY
cd $W && for d in *-cpu; do xz -T2 $d/alloc.trace 2>/dev/null; rm -f $d/record.jsonl; done
tar cJf $o/batch.tar.xz . 2>/dev/null
ls -la $o
}

suite_histories() {
set -u
. bench/gpu/env.sh
[ $# -gt 0 ] || { echo "usage: bench/gpu/run.sh histories NAME..." >&2; exit 2; }
mkdir -p "$o"
record_env "$o/env-histories.txt"
export PYTHONPATH=$PWD/python
h=/tmp/histories
rm -rf $h; mkdir -p $h
ngpu=$(nvidia-smi -L | wc -l)
hist() { # GPU NAME...
  g=$1; shift
  for n in "$@"; do
    CUDA_VISIBLE_DEVICES=$g python3 bench/gpu/jobs/tracer_checks.py history $h $n >> "$o/history-$g.txt" 2>>"$o/errors-histories.txt"
    d=$h/$n
    python3 -c "import pickle, json, sys; sys.path.insert(0, 'bench/gpu/jobs'); from job_common import summary; json.dump(summary(pickle.load(open('$d/hist.pickle', 'rb'))), open('$d/large.json', 'w'), indent=1)" 2>>"$o/errors-histories.txt"
    python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
      $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-histories.txt"
    xz -T4 $d/hist.trace; rm -f $d/hist.pickle
  done
}
if [ "$ngpu" -ge 2 ]; then
  a= b= i=0
  for n in "$@"; do if [ $((i % 2)) = 0 ]; then a="$a $n"; else b="$b $n"; fi; i=$((i + 1)); done
  # shellcheck disable=SC2086
  { hist 0 $a & hist 1 $b & wait; }
else
  hist 0 "$@"
fi
tar -C $h -cJf "$o/histories.tar.xz" . 2>>"$o/errors-histories.txt"
ls -la "$o"
}

suite=${VL_SUITE:-trace}
"suite_${suite//-/_}" "$@"
