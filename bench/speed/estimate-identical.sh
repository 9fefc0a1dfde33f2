#!/bin/sh
# Did a change to speed leave every estimate as it was? `estimate` of every
# bundled model (data/models), training and inference, text and JSON, by
# two binaries, compared byte for byte; and `sensitivity` of the GPT-2 and
# Llama-3-8B LoRA queries (JSON, `distinct_jobs` set aside where only one
# binary has it).
#   VL_BIN_BEFORE=old/vramledger VL_BIN=new/vramledger bench/speed/estimate-identical.sh
set -eu
cd "$(dirname "$0")/../.."
before=${VL_BIN_BEFORE:?give VL_BIN_BEFORE}
after=${VL_BIN:-build-rel/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
differ=0
for m in data/models/*.json; do
  for job in "--batch 2 --seq 256" "--task infer --batch 2 --seq 128 --new-tokens 32" \
    "--precision bf16 --lora-rank 16 --batch 2 --seq 256"; do
    for fmt in text json; do
      n=$((n + 1))
      # shellcheck disable=SC2086
      "$before" estimate --model "$m" $job --format $fmt >"$tmp/a" 2>&1 || true
      # shellcheck disable=SC2086
      "$after" estimate --model "$m" $job --format $fmt >"$tmp/b" 2>&1 || true
      if ! cmp -s "$tmp/a" "$tmp/b"; then
        echo "differs: estimate --model $m $job --format $fmt"
        differ=$((differ + 1))
      fi
    done
  done
done
for q in "--model gpt2 --batch 8 --seq 1024 --vary seq=±20% --gpus h100-80gb,l4" \
  "--model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$before" sensitivity $q --format json | grep -v '"distinct_jobs"' >"$tmp/a"
  # shellcheck disable=SC2086
  "$after" sensitivity $q --format json | grep -v '"distinct_jobs"' >"$tmp/b"
  if ! cmp -s "$tmp/a" "$tmp/b"; then
    echo "differs: sensitivity $q"
    differ=$((differ + 1))
  fi
done
echo "$n outputs compared, $differ differ"
[ "$differ" = 0 ]
