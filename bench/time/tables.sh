#!/bin/sh
# Regenerate lib/model/kernel_tables.h from the measured datasets
# (data/reference/*/kernels.json, attention.json) and the host fit.
#   bench/time/tables.sh build/vramledger
set -eu
cd "$(dirname "$0")/../.."
fit=$(python3 bench/time/host_fit.py "${1:-build/vramledger}" bench/results/step-time/h200/host/host.json | tail -1)
op=$(echo "$fit" | sed 's/Theil-Sen: \([^ ]*\) s an op, \([^ ]*\) s a step/\1/')
step=$(echo "$fit" | sed 's/Theil-Sen: \([^ ]*\) s an op, \([^ ]*\) s a step/\2/')
python3 bench/time/distill.py "$op" "$step" \
  h100-80gb=data/reference/h100-torch-2.11/kernels.json+data/reference/h100-torch-2.11/attention.json \
  h200=data/reference/h200-torch-2.11/kernels.json > lib/model/kernel_tables.h
echo "lib/model/kernel_tables.h: host $op s an op, $step s a step"
clang-format -i lib/model/kernel_tables.h
