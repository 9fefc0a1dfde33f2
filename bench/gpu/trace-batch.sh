#!/bin/bash
# How close is a dry run at one micro-batch replayed at others (`trace --batch`) to the H200?
#   bench/gpu/run.sh trace-batch
# GPU evidence for `vramledger trace --batch`: a CPU dry run at
# one micro-batch, replayed at others, against the same job measured on the
# H200 at those batches. Needs build-rel/ (carry). Writes $OUT/batch.jsonl
# (one line per configuration: the dry run's replays and the GPU's
# max_memory_allocated/reserved at each batch) and $OUT/batch.tar.xz.
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
      python3 bench/gpu/jobs/trace_job.py --device cuda --steps 2 --batch $b $args 2>/dev/null | tail -1 > $W/$name-gpu-$b.json
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
        python3 bench/gpu/jobs/trace_job.py --device cpu --steps 2 --batch $first $args > $W/$name-cpu.json 2> $W/$name-cpu.log &
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
