#!/bin/sh
# The estimate against its own dry run on meta tensors (`estimate --dry-run`),
# for the jobs docs/model.md and the bill's approximate notes quote: one line
# each, peak allocated and reserved, and the formula's gap in percent.
#   VRAMLEDGER_PYTHON=... bench/accuracy/estimate_vs_dry_run.sh [VL_BIN] > bench/results/dry-run/estimate-vs-dry-run.txt
set -u
bin=${1:-build/vramledger}
while IFS='|' read -r model args; do
  [ -n "$model" ] || continue
  # shellcheck disable=SC2086
  "$bin" estimate --model "$model" $args --dry-run --format json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin); r = d['dry_run']; p = r['formula_vs_dry_run_pct']
G = 2 ** 30
print('%-28s %-62s est %7.3f / %7.3f  dry %7.3f / %7.3f GiB  %+6.2f / %+6.2f %%' % (sys.argv[1], sys.argv[2],
      d['peak_allocated_bytes'] / G, d['peak_reserved_bytes'] / G, r['peak_allocated_bytes'] / G,
      r['peak_reserved_bytes'] / G, p['peak_allocated'], p['peak_reserved']))" "$model" "$args" ||
    echo "$model $args: failed"
done <<'JOBS'
phi-3-mini|--precision bf16 --lora-rank 8 --lora-targets all-linear --checkpointing full --batch 4 --seq 2048
bench/configs/llama-2-7b-3l-v512.json|--precision amp-bf16 --lora-rank 8 --lora-targets all-linear --checkpointing full --batch 2 --seq 1024
phi-2|--precision bf16 --lora-rank 16 --batch 2 --seq 2048
t5-base|--precision bf16 --batch 8 --seq 512
t5-base|--precision bf16 --batch 8 --seq 512 --target-seq 64
t5-base|--precision bf16 --batch 4 --seq 1024 --target-seq 128
t5-base|--precision bf16 --batch 16 --seq 256
bench/configs/flan-t5-base.json|--precision bf16 --batch 8 --seq 512 --target-seq 128
t5-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --checkpointing full
t5-base|--precision bf16 --batch 4 --seq 1024 --target-seq 64 --checkpointing full
t5-base|--precision fp32 --batch 4 --seq 1024 --target-seq 64 --checkpointing full
bench/configs/flan-t5-base.json|--precision fp32 --batch 8 --seq 512 --target-seq 128 --checkpointing full
t5-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --lora-rank 16
t5-base|--precision bf16 --batch 4 --seq 1024 --target-seq 64 --lora-rank 16
t5-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --lora-rank 16 --checkpointing full
bart-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --checkpointing full
bart-base|--precision bf16 --batch 4 --seq 512 --target-seq 32
bart-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --lora-rank 16
bart-base|--precision bf16 --batch 8 --seq 512 --target-seq 128 --lora-rank 16 --checkpointing full
bert-base-uncased|--precision bf16 --batch 16 --seq 512 --attention eager
bert-large-uncased|--precision bf16 --batch 8 --seq 512 --attention eager
bert-base-uncased|--precision bf16 --batch 16 --seq 512 --lora-rank 16
bert-base-uncased|--precision bf16 --batch 8 --seq 128 --lora-rank 16
bert-base-uncased|--precision fp32 --batch 16 --seq 512 --lora-rank 16
bert-base-uncased|--precision bf16 --batch 16 --seq 512 --lora-rank 16 --lora-targets all-linear
bert-base-uncased|--precision bf16 --batch 16 --seq 512 --lora-rank 16 --checkpointing full
bert-large-uncased|--precision bf16 --batch 16 --seq 512 --lora-rank 16
bert-large-uncased|--precision fp32 --batch 4 --seq 512 --lora-rank 16
roberta-base|--precision bf16 --batch 16 --seq 512 --lora-rank 16
roberta-base|--precision fp32 --batch 16 --seq 512 --lora-rank 16
roberta-base|--precision bf16 --batch 4 --seq 512 --lora-rank 16 --lora-targets all-linear
roberta-base|--precision bf16 --batch 16 --seq 512 --lora-rank 16 --checkpointing full
distilbert-base-uncased|--precision bf16 --batch 16 --seq 512 --lora-rank 16
distilbert-base-uncased|--precision fp32 --batch 8 --seq 128 --lora-rank 16
distilbert-base-uncased|--precision bf16 --batch 16 --seq 512
modernbert-base|--precision bf16 --batch 16 --seq 512 --lora-rank 16
modernbert-base|--precision bf16 --batch 4 --seq 512 --lora-rank 16
modernbert-base|--precision fp32 --batch 16 --seq 512 --lora-rank 16
deberta-v3-base|--precision bf16 --batch 16 --seq 512 --lora-rank 16
deberta-v3-base|--precision bf16 --batch 8 --seq 128 --lora-rank 16
deberta-v3-base|--precision bf16 --batch 16 --seq 512
JOBS
