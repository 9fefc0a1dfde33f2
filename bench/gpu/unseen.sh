#!/bin/bash
# How close is the estimator on configurations outside the calibration set, written down before they were measured?
#   bench/gpu/run.sh unseen [SET]
# SET: the lines of bench/configs/unseen-sets.jsonl whose "set" it is
# (default unseen; unseen2 ... unseen7), or bench/configs/SET.jsonl
# (repeat4). Each configuration in a process of its own, half on each of two
# GPUs, merged into $OUT/SET.json for `vramledger validate --results`
# (every run a hold-out), with $OUT/SET-validate.txt, SET-time.txt and the
# end of each GPU's log. The sets measured so far: bench/results/nccl-run/
# (unseen, unseen2), unseen-sets/ (unseen3, unseen4, repeat4),
# replay-histories/ (unseen5, unseen6, unseen7). Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
tag=${1:-unseen}
list=bench/configs/$tag.jsonl
if [ ! -f "$list" ]; then # a set of unseen-sets.jsonl, its lines without "set"
  list=/tmp/unseen-$tag.jsonl
  python3 - "$tag" bench/configs/unseen-sets.jsonl > "$list" <<'PY'
import json, sys
for line in open(sys.argv[2]):
    c = json.loads(line)
    if c.pop("set") == sys.argv[1]:
        print(json.dumps(c))
PY
  [ -s "$list" ] || { echo "unseen.sh: no set $tag in bench/configs/unseen-sets.jsonl, no bench/configs/$tag.jsonl" >&2; exit 2; }
fi
mkdir -p "$o"
record_env "$o/env-$tag.txt"
export PYTHONPATH=$PWD/python
rm -rf /tmp/u; mkdir -p /tmp/u
one() { # GPU PARITY
  i=0
  while read -r line; do
    if [ $((i % 2)) = "$2" ]; then
      n=$(echo "$line" | python3 -c "import json,sys; print(json.load(sys.stdin)['name'])")
      cfg=$(echo "$line" | python3 -c "import json,sys; c=json.load(sys.stdin); c['holdout']=True; print(json.dumps(c))")
      CUDA_VISIBLE_DEVICES=$1 python3 python/vramledger/measure.py /tmp/u/$n.json --config "$cfg" </dev/null \
          >> "$o/$tag-$1.log" 2>&1
    fi
    i=$((i + 1))
  done < "$list"
}
t0=$(date +%s)
one 0 0 & one 1 1 & wait
echo "$(wc -l < "$list") configurations on 2 GPUs: $(( $(date +%s) - t0 )) s" > "$o/$tag-time.txt"
python3 - "$o/$tag.json" "$list" /tmp/u/*.json <<'PY'
import json, sys
out, src, files = sys.argv[1], sys.argv[2], sys.argv[3:]
merged = None
for f in files:
    d = json.load(open(f))
    if merged is None:
        merged = dict(d, suite="outside the calibration set (%s)" % src, runs=[])
    merged["runs"] += d["runs"]
json.dump(merged, open(out, "w"), indent=1)
PY
$vl validate --results "$o/$tag.json" > "$o/$tag-validate.txt" 2>&1
for g in 0 1; do tail -c 8000 "$o/$tag-$g.log" > "$o/$tag-$g-tail.log"; rm -f "$o/$tag-$g.log"; done
ls -la "$o"
