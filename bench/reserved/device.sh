#!/bin/sh
# One device call of the reserved-memory question, into $OUT:
#   sh bench/reserved/device.sh suites     both suites (reserved.jsonl, vision-seq2seq.jsonl)
#   sh bench/reserved/device.sh histories [CONFIGS]  the allocator's history of each
#                                          line of CONFIGS (bench/configs/reserved-history.jsonl)
# with the card, driver and versions in $OUT/env.txt.
set -u
o=${OUT:?OUT: the results folder}
mkdir -p "$o"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)"; } > "$o/env.txt" 2>&1
case ${1:-suites} in
suites)
  sh bench/reserved/run.sh "$o/reserved.json" bench/configs/reserved.jsonl > "$o/reserved.log" 2>&1
  sh bench/reserved/run.sh "$o/vision-seq2seq.json" bench/configs/vision-seq2seq.jsonl > "$o/vision-seq2seq.log" 2>&1 ;;
histories)
  mkdir -p "$o/history"
  while IFS= read -r line; do
    n=$(printf '%s' "$line" | python3 -c "import json, sys; print(json.load(sys.stdin)['name'])")
    timeout 120 python3 bench/reserved/history.py "$o/history/$n.jsonl.gz" "$line" >> "$o/history/log.txt" 2>&1
  done < "${2:-bench/configs/reserved-history.jsonl}" ;;
esac
