#!/bin/bash
# The dry run's question (bench/results/dry-run/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_dry_run).
#
# suite dry-run: How close is `vramledger trace`'s dry run (meta tensors, or the CPU under autocast) to the H200's peaks, and PyTorch's MemTracker beside it?
#   bench/gpu/run.sh dry-run [--only NAME,...]
# bench/gpu/jobs/dry_run.py over bench/configs/dry-run.txt with
# --memtracker: writes $OUT/dry-run.jsonl, memtracker.jsonl and
# traces.tar.xz; bench/accuracy/dry_run_table.py compares them with the
# H200's measurements (bench/results/dry-run/). Runs on the device
# machine's CPUs (its torch has CUDA for MemTracker's fake tensors); needs
# build-rel/ (carry).
#
# suite dry-run-unseen: How close is the dry run on shapes written down before they were traced or measured?
#   bench/gpu/run.sh dry-run-unseen [--only NAME,...]
# Each configuration of bench/configs/dry-run-unseen.jsonl (with the device
# its dry run takes: meta or cpu) is traced by `vramledger trace` on the
# machine's CPUs (bench/gpu/jobs/dry_run.py --configs) while the H200
# measures the same job (measure.py --config, one process each). Writes
# $OUT/dry-run.jsonl, traces.tar.xz and measured.json; compare with
#   python3 bench/accuracy/dry_run_table.py DIR --measured DIR/measured.json
# Needs build-rel/ (carry).
#
# suite estimate-dry-run: How close is `vramledger estimate --dry-run` (real transformers on meta tensors) to the H200?
#   bench/gpu/run.sh estimate-dry-run
# `vramledger estimate --dry-run` with real transformers, against the H200.
# Every line of bench/configs/estimate-dry-run.txt is estimated on the CPUs
# (CUDA_VISIBLE_DEVICES= : meta tensors, no GPU); the entries marked
# "measure" are also measured on the GPU by measure.py with the same job
# (its "#measure JSON" lines hold their --config JSON). Writes
# OUT/estimate-dry-run/{NAME.json,NAME.err,NAME.measured.json,env.txt}.
#   bench/gpu/run.sh estimate-dry-run   (on the device, from the repository root)
#
# suite known-misses: How far off are the estimator's known misses, by the formula and by the dry run?
#   bench/gpu/run.sh known-misses
# The estimator's known misses, measured on the H200 and dry-run on its
# CPUs: each entry of bench/configs/known-misses.json measured by measure.py
# (GPU) and traced by `vramledger trace` on meta (or CPU for autocast), for
# bench/accuracy/dry_run_table.py known-misses. Writes OUT/known-misses/.

suite_dry_run() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
VL=$vl CUDA_VISIBLE_DEVICES= python3 bench/gpu/jobs/dry_run.py "$o" --memtracker "$@"
}

# The runs of a results file measured while dry runs traced on the same
# host's CPUs: "host_shared", so validate compares their memory and leaves
# their step time out (docs/cmd/validate.md)
host_shared() {
  python3 - "$@" <<'PY'
import json, sys
for p in sys.argv[1:]:
    d = json.load(open(p))
    for r in d.get("runs", []):
        r["host_shared"] = True
    json.dump(d, open(p, "w"), indent=1)
PY
}

suite_dry_run_unseen() {
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
for r in runs:  # timed while dry_run.py traced on the same CPUs: validate leaves the step time out
    r["host_shared"] = True
head = dict(head or {}, suite=cfg, runs=runs)
json.dump(head, open(out + "/measured.json", "w"), indent=1)
PY
}

suite_estimate_dry_run() {
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
for c in [json.loads(l[len("#measure "):]) for l in open("bench/configs/estimate-dry-run.txt") if l.startswith("#measure ")]:
    subprocess.run([sys.executable, "python/vramledger/measure.py", "%s/%s.measured.json" % (d, c["name"]),
                    "--config", json.dumps(c)], capture_output=True)
P
wait
host_shared "$d"/*.measured.json
}

suite_known_misses() {
set -u
. bench/gpu/env.sh
d=$o/known-misses
mkdir -p "$d"
record_env "$d/env.txt"
python3 - "$d" "$vl" <<'P'
import json, subprocess, sys, concurrent.futures as cf, os
d, vl = sys.argv[1], sys.argv[2]
cs = json.load(open("bench/configs/known-misses.json"))
def dry(c):
    dev = "cpu" if c["precision"].startswith("amp") else "meta"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="2")
    p = subprocess.run([vl, "trace", "--out", "/tmp/km-" + c["name"], "--format", "json", "--gpu", "h200",
                        "--from-mark", "measure", "--", sys.executable, "python/vramledger/measure.py",
                        "/tmp/km-%s.json" % c["name"], "--in-process", "--device", dev, "--config", json.dumps(c)],
                       capture_output=True, text=True, env=env)
    open("%s/%s.dry.json" % (d, c["name"]), "w").write(p.stdout)
    subprocess.run(["xz", "-kf", "/tmp/km-%s/alloc.trace" % c["name"]])
    subprocess.run(["cp", "/tmp/km-%s/alloc.trace.xz" % c["name"], "%s/%s.trace.xz" % (d, c["name"])])
    return c["name"], p.returncode
with cf.ThreadPoolExecutor(6) as ex:
    futs = [ex.submit(dry, c) for c in cs]
    for c in cs:
        subprocess.run([sys.executable, "python/vramledger/measure.py", "%s/%s.measured.json" % (d, c["name"]),
                        "--config", json.dumps(c)], capture_output=True)
    for f in futs:
        print(*f.result())
P
host_shared "$d"/*.measured.json
}

suite=${VL_SUITE:-dry-run}
"suite_${suite//-/_}" "$@"
