#!/bin/sh
# The MoE replay against the dry run on meta tensors of the same job, on
# this machine (no GPU): 2- and 4-layer copies of the bundled MoE configs,
# training (full, LoRA, checkpointed) and generate(). One JSON line a job:
# its arguments, the estimate's and the dry run's peaks (bytes), and the
# estimate's error against the dry run (estimate's formula_vs_dry_run_pct).
#   VRAMLEDGER_PYTHON=PY sh bench/reserved/dry_runs.sh BUILD/vramledger > OUT.jsonl
set -u
vl=${1:?usage: dry_runs.sh VRAMLEDGER}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in mixtral-8x7b:2 mixtral-8x7b:4 qwen3-30b-a3b:4 olmoe-1b-7b:4 deepseek-v2-lite:4; do
  name=${m%:*} layers=${m#*:}
  python3 -c "import json, sys; c = json.load(open('data/models/$name.json')); c['num_hidden_layers'] = $layers; json.dump(c, sys.stdout)" > "$tmp/$name-$layers.json"
done
while IFS='|' read -r model args; do
  [ -n "$model" ] || continue
  # shellcheck disable=SC2086
  "$vl" estimate --model "$tmp/$model.json" $args --precision bf16 --dry-run --format json 2>/dev/null |
    python3 -c "
import json, sys
d = json.load(sys.stdin); r = d['dry_run']
print(json.dumps({'model': '$model', 'args': '$args', 'estimate_allocated': d['peak_allocated_bytes'],
                  'estimate_reserved': d['peak_reserved_bytes'], 'dry_run_allocated': r['peak_allocated_bytes'],
                  'dry_run_reserved': r['peak_reserved_bytes'], 'pct': r['formula_vs_dry_run_pct']}))" ||
    echo "{\"model\": \"$model\", \"args\": \"$args\", \"error\": true}"
done <<'JOBS'
mixtral-8x7b-2|--batch 2 --seq 1024
mixtral-8x7b-2|--batch 2 --seq 1024 --lora-rank 16
mixtral-8x7b-2|--batch 2 --seq 1024 --lora-rank 16 --checkpointing full
mixtral-8x7b-4|--task infer --batch 4 --seq 512 --new-tokens 32
qwen3-30b-a3b-4|--batch 2 --seq 1024
qwen3-30b-a3b-4|--batch 2 --seq 1024 --checkpointing full
qwen3-30b-a3b-4|--batch 1 --seq 2048 --lora-rank 16
qwen3-30b-a3b-4|--batch 1 --seq 2048 --lora-rank 16 --checkpointing full
qwen3-30b-a3b-4|--task infer --batch 4 --seq 512 --new-tokens 32
olmoe-1b-7b-4|--batch 2 --seq 1024
olmoe-1b-7b-4|--task infer --batch 4 --seq 512 --new-tokens 32
deepseek-v2-lite-4|--batch 2 --seq 1024
deepseek-v2-lite-4|--task infer --batch 4 --seq 512 --new-tokens 32
JOBS
