#!/bin/sh
# Peak reserved memory, measured: each configuration of a JSON Lines file
# (bench/configs/reserved.jsonl, vision-seq2seq.jsonl) in a Python process
# of its own (a block an earlier run left cached would count in a later
# run's reservation: python/vramledger/measure.py), then one results file
# `vramledger validate --results` reads.
#   bench/reserved/run.sh OUT.json CONFIGS.jsonl... (on one GPU)
#
# One device call of the reserved-memory question, into $OUT:
#   sh bench/reserved/run.sh suites     both suites (reserved.jsonl, vision-seq2seq.jsonl)
#   sh bench/reserved/run.sh histories [CONFIGS]  the allocator's history of each
#                                          line of CONFIGS (bench/configs/reserved-history.jsonl)
# with the card, driver and versions in $OUT/env.txt.
set -u
case ${1:-} in
suites | histories)
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
      timeout 120 python3 bench/reserved/jobs.py history "$o/history/$n.jsonl.gz" "$line" >> "$o/history/log.txt" 2>&1
    done < "${2:-bench/configs/reserved-history.jsonl}" ;;
  esac
  exit 0 ;;
esac
out=${1:?usage: run.sh OUT.json CONFIGS.jsonl...}
shift
# each run's file is kept beside OUT (OUT.parts/) until the end, so a call
# stopped early leaves what it measured
tmp=${out%.json}.parts
mkdir -p "$tmp"
i=0
cat "$@" | while IFS= read -r line; do
  [ -n "$line" ] || continue
  i=$((i + 1))
  PYTHONPATH=$PWD/python timeout 300 python3 python/vramledger/measure.py "$tmp/$i.json" \
    --config "$line" >"$tmp/$i.log" 2>&1 || echo "config $i: status $?" >&2
  tail -1 "$tmp/$i.log"
done
python3 - "$out" "$tmp" <<'PY'
import glob, json, os, sys
out, tmp = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(os.path.join(tmp, "*.json")), key=lambda p: int(os.path.basename(p)[:-5]))
res = None
for p in files:
    d = json.load(open(p))
    if res is None:
        res = d
    else:
        res["runs"] += d["runs"]
json.dump(res, open(out, "w"), indent=1)
print(len(res["runs"]) if res else 0, "runs into", out)
PY
