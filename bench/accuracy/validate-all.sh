#!/bin/sh
# Every validate table the estimator is judged by: the calibration set,
# the seven sets outside it (one file), the expandable
# segments runs and every whole-job DDP / ZeRO-1 rank on 2 H200s. Usage: bench/accuracy/validate-all.sh [VRAMLEDGER] > FILE
vl=${1:-build/vramledger}
r=bench/results
for f in data/reference/h200-torch-2.11/calibration-isolated.json \
    data/reference/h200-torch-2.11/unseen-measured.json \
    $r/calibration/expandable-segments.json \
    data/reference/h200-torch-2.11/ddp-measured.json; do
  echo "\$ vramledger validate --results $f"
  "$vl" validate --results "$f"; echo "(exit $?)"
  echo
done
