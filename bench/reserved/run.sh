#!/bin/sh
# Peak reserved memory, measured: each configuration of a JSON Lines file
# (bench/configs/reserved.jsonl, vision-seq2seq.jsonl) in a Python process
# of its own (a block an earlier run left cached would count in a later
# run's reservation: python/vramledger/measure.py), then one results file
# `vramledger validate --results` reads.
#   bench/reserved/run.sh OUT.json CONFIGS.jsonl... (on one GPU)
set -u
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
