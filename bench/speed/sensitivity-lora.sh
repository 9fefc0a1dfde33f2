#!/bin/sh
# Speed of `vramledger sensitivity` on the Llama-3-8B LoRA query with three
# spreads, where nearly every draw is a new job (a full estimate, replay
# and all): the query at the default --estimates, the time of one estimate
# (from the difference of --estimates 256 and 1280), the distinct jobs the
# 10^5 draws hold, and the pass that estimates all of them.
#   VL_BIN=build/vramledger [VL_BIN_BEFORE=old/vramledger] bench/speed/sensitivity-lora.sh
# Prints Markdown (bench/results/speed/README.md#sensitivity-lora).
set -eu
cd "$(dirname "$0")/../.."
bin=${VL_BIN:-build-rel/vramledger}
q="sensitivity --model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200 --samples 100000"

# user seconds of one run (best of $2), and "drawn estimates" of its JSON
user_s() {
  best=
  for _ in $(seq "$2"); do
    # shellcheck disable=SC2086
    t=$( { /usr/bin/time -f %U "$3" $q $1 >/dev/null; } 2>&1 )
    best=$(python3 -c "print(min(float(x) for x in '$t $best'.split()))")
  done
  echo "$best"
}
facts() {
  # shellcheck disable=SC2086
  "$2" $q $1 --format json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['drawn'], d['estimates'], d.get('distinct_jobs'))"
}

set -- $(facts "" "$bin")
distinct=$3
echo "| binary | --estimates | draws taken | distinct jobs estimated | user s |"
echo "|---|---:|---:|---:|---:|"
for b in ${VL_BIN_BEFORE:-} "$bin"; do
  name=after
  [ "$b" = "$bin" ] || name=before
  for e in 1024 256 1280 "$distinct"; do
    reps=3
    [ "$e" = "$distinct" ] && reps=1
    s=$(user_s "--estimates $e" $reps "$b")
    set -- $(facts "--estimates $e" "$b")
    echo "| $name | $e | $1 | $2 | $s |"
  done
done
echo
echo "the 100000 draws hold $distinct distinct jobs"
