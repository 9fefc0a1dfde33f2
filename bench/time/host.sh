#!/bin/sh
# What the host costs a step: tiny models (hidden 64, 4 layers, 16 tokens:
# no kernel is long enough to hide Python and the dispatcher) of ten model
# types, timed as measure.py times training steps (20 steps, median). Their
# configs are the lines' "config" (host_fit.py --write-configs writes them).
#   bench/time/host.sh OUTDIR
set -u
o=${1:?usage: host.sh OUTDIR}
mkdir -p "$o"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'; } > "$o/env.txt" 2>&1
python3 bench/time/host_fit.py --write-configs
PYTHONPATH=$PWD/python timeout 300 python3 python/vramledger/measure.py "$o/host.json" \
  --configs bench/configs/host.jsonl --in-process > "$o/host.log" 2>&1
echo "status $?" >> "$o/env.txt"
