#!/bin/bash
# Does the interposer see what PyTorch reserves, and what do `run`, the interposer and the sampler cost?
#   bench/gpu/run.sh interposer   (IP_REPS: the overhead's repeats each way, default 5)
# (bench/results/run-interposer/) Writes into $OUT: interposer.jsonl,
# overhead.jsonl, alloc_bench.jsonl, sampler.json, the spike's report and
# record, and the run records. Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
mkdir -p "$o"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$o/env.txt"
python3 -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$o/env.txt"

# 1. interposer live bytes vs torch.cuda.memory_reserved(), three allocators
for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
  PYTORCH_CUDA_ALLOC_CONF=$conf $vl run --quiet --out "/tmp/rec-$(echo "$conf" | tr -c 'a-zA-Z' _)" -- \
    python3 bench/gpu/jobs/interposer_check.py >> "$o/interposer.jsonl" 2>>"$o/errors.txt"
done

# 2. overhead on a GPT-2 training loop, interleaved, IP_REPS repeats each way
for i in $(seq "${IP_REPS:-5}"); do
  echo "{\"with\": false, \"r\": $(python3 bench/gpu/jobs/gpt2_loop.py 40 2>>"$o/errors.txt")}" >> "$o/overhead.jsonl"
  echo "{\"with\": true, \"r\": $($vl run --quiet --out /tmp/ovh-$i -- python3 bench/gpu/jobs/gpt2_loop.py 40 2>>"$o/errors.txt")}" >> "$o/overhead.jsonl"
done

# 3. cudaMalloc/cudaFree pairs with and without the interposer
nvcc -O2 -o /tmp/alloc_bench bench/gpu/jobs/alloc_bench.cu 2>>"$o/errors.txt"
for i in 1 2 3; do
  echo "{\"preload\": false, \"r\": $(/tmp/alloc_bench 1000000)}" >> "$o/alloc_bench.jsonl"
  echo "{\"preload\": true, \"r\": $(LD_PRELOAD=$VRAMLEDGER_PRELOAD /tmp/alloc_bench 1000000)}" >> "$o/alloc_bench.jsonl"
done

# 4. the sampler's own cost at 100 Hz, and a 50 ms spike caught
python3 -c "
import resource, subprocess, sys, time
t = time.time()
subprocess.run(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print('{\"user_s\": %.3f, \"sys_s\": %.3f, \"wall_s\": %.3f}' % (r.ru_utime, r.ru_stime, time.time() - t))
" $vl run --quiet --interval-ms 10 --out /tmp/idle -- sleep 10 > "$o/sampler.json"
$vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/gpu/jobs/spike.py
$vl report /tmp/spike --format json > "$o/spike_report.json"
cp /tmp/spike/record.jsonl "$o/spike_record.jsonl"
$vl report "/tmp/rec-_" --format json > "$o/interposer_default_report.json" 2>/dev/null
ls /tmp | grep rec- >> "$o/errors.txt"
