#!/bin/bash
# How close is `vramledger estimate --dry-run` (real transformers on meta tensors) to the H200?
#   bench/gpu/run.sh estimate-dry-run
# `vramledger estimate --dry-run` with real transformers, against the H200.
# Every line of bench/configs/estimate-dry-run.txt is estimated on the CPUs
# (CUDA_VISIBLE_DEVICES= : meta tensors, no GPU); the entries marked
# "measure" are also measured on the GPU by measure.py with the same job
# (bench/configs/estimate-dry-run.json holds their --config JSON). Writes
# OUT/estimate-dry-run/{NAME.json,NAME.err,NAME.measured.json,env.txt}.
#   sh bench/gpu/estimate-dry-run.sh   (on the device, from the repository root)
set -u
. bench/gpu/env.sh
d=$o/estimate-dry-run
mkdir -p "$d"
record_env "$d/env.txt"
grep -v '^#' bench/configs/estimate-dry-run.txt | { while read -r name how args; do
  [ -n "$name" ] || continue
  # shellcheck disable=SC2086
  (t0=$(date +%s)
   CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2 "$vl" estimate $args --gpu h200 --format json \
     > "$d/$name.json" 2> "$d/$name.err"
   echo "rc $? seconds $(($(date +%s) - t0))" >> "$d/$name.err") &
done; wait; } &
python3 - "$d" <<'P'
import json, subprocess, sys
d = sys.argv[1]
for c in json.load(open("bench/configs/estimate-dry-run.json")):
    subprocess.run([sys.executable, "python/vramledger/measure.py", "%s/%s.measured.json" % (d, c["name"]),
                    "--config", json.dumps(c)], capture_output=True)
P
wait
