#!/bin/sh
# Speed of `vramledger sensitivity` (the target: 10^5 samples under 1 s), every
# draw estimated by the estimator (memoised per distinct job, at most
# --estimates distinct jobs a pass), fallbacks included: GPT-2 with one
# spread (every draw estimated) and the Llama-3-8B LoRA query with three
# (the estimate limit reached).
set -eu
cd "$(dirname "$0")/../.."
bin=${VL_BIN:-build-rel/vramledger}
q1="sensitivity --model gpt2 --batch 8 --seq 1024 --vary seq=±20% --gpus h100-80gb,l4 --samples 100000"
q2="sensitivity --model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200 --samples 100000"
echo "| query | draws taken | distinct jobs estimated | user s (best of 3) |"
echo "|---|---:|---:|---:|"
for q in "$q1" "$q2"; do
  # shellcheck disable=SC2086
  info=$($bin $q --format json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['drawn'], d['estimates'])")
  best=
  for _ in 1 2 3; do
    # shellcheck disable=SC2086
    t=$( { /usr/bin/time -f %U $bin $q >/dev/null; } 2>&1 )
    best=$(python3 -c "print(min(float(x) for x in '$t $best'.split()))")
  done
  set -- $info
  echo "| \`$q\` | $1 | $2 | $best |"
done
