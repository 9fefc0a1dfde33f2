#!/bin/sh
# Speed of `vramledger plan` (the target: searching 10^5 candidates under 1 s):
# a search of 116,376 configurations, printed as the top-15 table (the
# search) and as JSON with every feasible candidate (search + rendering).
# Uses hyperfine (Debian package).
set -eu
cd "$(dirname "$0")/../.."
command -v hyperfine >/dev/null || { echo "bench/speed/plan.sh needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
bin=${VL_BIN:-build-rel/vramledger}
q="plan --model llama-2-7b --precision bf16 --seq 128 --tokens 100000000000 --global-batch 1048576 --max-gpus 65536"
n=$($bin $q --format json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['evaluated'], len(d['candidates']))")
hyperfine -N -i --warmup 2 --runs 10 --export-json /tmp/plan_bench.json "$bin $q" "$bin $q --format json" >/dev/null 2>&1
python3 - $n <<'PY'
import json, sys
ev, feas = int(sys.argv[1]), int(sys.argv[2])
rs = json.load(open("/tmp/plan_bench.json"))["results"]
print("| output | configurations estimated | feasible | mean s | max s | per 10^5 configurations, s |")
print("|---|---:|---:|---:|---:|---:|")
for r, name in zip(rs, ["table (top 15)", "json (all feasible)"]):
    print(f"| {name} | {ev} | {feas} | {r['mean']:.3f} | {r['max']:.3f} | {r['mean'] * 1e5 / ev:.3f} |")
PY
