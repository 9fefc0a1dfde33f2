#!/bin/sh
# Every validate table the estimator is judged by: the calibration set,
# the sets outside it (in the order they were measured), the expandable
# segments runs and every whole-job DDP / ZeRO-1 rank on 2 H200s. Usage: bench/accuracy/validate-all.sh [VRAMLEDGER] > FILE
vl=${1:-build/vramledger}
r=bench/results
for f in data/reference/h200-torch-2.11/calibration-isolated.json \
    $r/nccl-run/part8-unseen/unseen.json \
    $r/nccl-run/part8b-unseen2/unseen2.json \
    $r/unseen-sets/part1-unseen3/unseen3.json \
    $r/unseen-sets/part3-unseen4/unseen4.json \
    $r/replay-histories/part1-unseen5/unseen5.json \
    $r/replay-histories/part4-unseen6/unseen6.json \
    $r/replay-histories/part6-unseen7/unseen7.json \
    $r/calibration/expandable-segments.json \
    data/reference/h200-torch-2.11/ddp-measured.json; do
  echo "\$ vramledger validate --results $f"
  "$vl" validate --results "$f"; echo "(exit $?)"
  echo
done
