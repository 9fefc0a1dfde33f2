#!/bin/bash
# How far off are the estimator's known misses, by the formula and by the dry run?
#   bench/gpu/run.sh known-misses
# The estimator's known misses, measured on the H200 and dry-run on its
# CPUs: each entry of bench/configs/known-misses.json measured by measure.py
# (GPU) and traced by `vramledger trace` on meta (or CPU for autocast), for
# bench/accuracy/known_misses_table.py. Writes OUT/known-misses/.
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
