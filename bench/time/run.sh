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
#   bench/time/run.sh --host OUTDIR
set -u
if [ "${1:-}" = --host ]; then
  o=${2:?usage: run.sh --host OUTDIR}
  mkdir -p "$o"
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'; } > "$o/env.txt" 2>&1
  python3 bench/time/host_fit.py --write-configs
  PYTHONPATH=$PWD/python timeout 300 python3 python/vramledger/measure.py "$o/host.json" \
    --configs bench/configs/host.jsonl --in-process > "$o/host.log" 2>&1
  echo "status $?" >> "$o/env.txt"
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
