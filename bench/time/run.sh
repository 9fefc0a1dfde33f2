#!/bin/sh
# How long does a training step take, and what does each kernel kind cost?
#   bench/time/run.sh OUTDIR [KERNEL_SECONDS STEP_SECONDS]
# On one GPU: bench/time/kernels.py (GEMM, memory-bound, SDPA, launch,
# optimizer tables) into OUTDIR/kernels.json, then the training steps of
# bench/configs/time.jsonl (each: two warm-up steps, the measured one,
# five timed steps; step_median_s) into OUTDIR/steps.json, with the
# versions in OUTDIR/env.txt. Each part stops at its time limit and keeps
# what it finished.
#
# What the host costs a step: tiny models (hidden 64, 4 layers, 16 tokens:
# no kernel is long enough to hide Python and the dispatcher) of ten model
# types, timed as measure.py times training steps (20 steps, median). Their
# configs are the lines' "config" (host_fit.py --write-configs writes them).
# Each in a process of its own, as a user's job runs (bench/reserved/run.sh);
# --in-process: all in one, one after another.
#   bench/time/run.sh --host OUTDIR [--in-process]
#
# Training steps timed each in a process of its own (time_steps 5 where a
# line has none): the lines of CONFIGS.jsonl whose "name" NAMES matches
# (an extended regular expression; all lines without it).
#   bench/time/run.sh --isolated OUT.json CONFIGS.jsonl [NAMES]
set -u
if [ "${1:-}" = --host ]; then
  o=${2:?usage: run.sh --host OUTDIR [--in-process]}
  mkdir -p "$o"
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'; } > "$o/env.txt" 2>&1
  python3 bench/time/host_fit.py --write-configs
  if [ "${3:-}" = --in-process ]; then
    PYTHONPATH=$PWD/python timeout 300 python3 python/vramledger/measure.py "$o/host.json" \
      --configs bench/configs/host.jsonl --in-process > "$o/host.log" 2>&1
  else
    sh bench/reserved/run.sh "$o/host.json" bench/configs/host.jsonl > "$o/host.log" 2>&1
  fi
  echo "status $?" >> "$o/env.txt"
  exit 0
fi
if [ "${1:-}" = --isolated ]; then
  out=${2:?usage: run.sh --isolated OUT.json CONFIGS.jsonl [NAMES]}
  lines=${out%.json}.jsonl
  mkdir -p "$(dirname "$out")"
  python3 - "${3:?usage: run.sh --isolated OUT.json CONFIGS.jsonl [NAMES]}" "${4:-.}" > "$lines" <<'PY'
import json, re, sys
for line in open(sys.argv[1]):
    if line.strip() and re.search(sys.argv[2], json.loads(line)["name"]):
        c = json.loads(line)
        c.setdefault("time_steps", 5)
        print(json.dumps(c))
PY
  sh bench/reserved/run.sh "$out" "$lines"
  exit 0
fi
o=${1:?usage: run.sh OUTDIR}
mkdir -p "$o"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)"
  lscpu | grep -E 'Model name|^CPU\(s\)'; } > "$o/env.txt" 2>&1
timeout "${2:-200}" python3 bench/time/kernels.py "$o/kernels.json" > "$o/kernels.log" 2>&1
echo "kernels: status $?" >> "$o/env.txt"
PYTHONPATH=$PWD/python timeout "${3:-360}" python3 python/vramledger/measure.py "$o/steps.json" \
  --configs bench/configs/time.jsonl --in-process > "$o/steps.log" 2>&1
echo "steps: status $?" >> "$o/env.txt"
