#!/bin/bash
# How close is the dry run on shapes written down before they were traced or measured?
#   bench/gpu/run.sh dry-run-unseen [--only NAME,...]
# Each configuration of bench/configs/dry-run-unseen.jsonl (with the device
# its dry run takes: meta or cpu) is traced by `vramledger trace` on the
# machine's CPUs (bench/gpu/jobs/dry_run.py --configs) while the H200
# measures the same job (measure.py --config, one process each). Writes
# $OUT/dry-run.jsonl, traces.tar.xz and measured.json; compare with
#   python3 bench/accuracy/dry_run_table.py DIR --measured DIR/measured.json
# Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
mkdir -p "$o/measured"
record_env "$o/env.txt"
cfg=bench/configs/dry-run-unseen.jsonl
VL=$vl CUDA_VISIBLE_DEVICES= python3 bench/gpu/jobs/dry_run.py "$o" --configs "$cfg" \
  --work /tmp/vl-dry-run-unseen "$@" > "$o/dry-run.log" 2>&1 &
while IFS= read -r line; do
  n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$line")
  python3 python/vramledger/measure.py "$o/measured/$n.json" --config "$line" > "$o/measured/$n.log" 2>&1 ||
    echo "$n: measure.py failed (see measured/$n.log)"
done < "$cfg"
wait
python3 - "$o" "$cfg" <<'PY'
import glob, json, sys
out, cfg = sys.argv[1], sys.argv[2]
runs, head = [], None
for p in sorted(glob.glob(out + "/measured/*.json")):
    d = json.load(open(p))
    head = head or {k: v for k, v in d.items() if k != "runs"}
    runs += d["runs"]
head = dict(head or {}, suite=cfg, runs=runs)
json.dump(head, open(out + "/measured.json", "w"), indent=1)
PY
