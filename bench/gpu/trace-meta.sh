#!/bin/bash
# How close is a dry run on meta tensors to the H200, and how long does a 70B shape take?
#   bench/gpu/run.sh trace-meta
# Evidence for dry runs on meta tensors: the configurations of
# bench/gpu/trace.sh that meta can run (no autocast on meta), traced with
# the job on meta tensors; compared with the H200 measurements of
# bench/results/trace/ (same script, same versions). And
# Llama-2-70B's shape, bf16, on meta: what no CPU could hold. Needs
# build-rel/ (carry). Writes $OUT/meta.jsonl and $OUT/meta.tar.xz.
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
        python3 bench/gpu/jobs/trace_job.py --device meta --steps 2 $args > $W/$name.json 2> $W/$name.log
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
