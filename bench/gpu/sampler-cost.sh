#!/bin/bash
# What does the sampler cost a core while a job holds or moves GPU memory?
#   bench/gpu/run.sh sampler-cost   (SC_REPS, SC_INTERVALS: repeats and intervals in ms;
#   SC_JOBS: flat, moving or both; SC_SECONDS: the job's length; SC_BINARIES:
#   vramledger binaries to compare, interleaved, default build-rel's)
# The sampler's own CPU time while a job holds GPU memory (flat) or moves it
# every 20 ms (moving: allocate 256 MiB, free, empty_cache), at 10 ms and
# 100 ms (or SC_INTERVALS): vramledger's user + system time from its exit event
# (sampler_cpu_ns, getrusage) over the run's wall time, and the sampling
# loop's alone (sampling_cpu_ns over sampling_wall_ns: without NVML's
# start). One JSON line each, after the floor of each interval (a line
# with "floor": true: what a loop that only sleeps costs there).
# Sources bench/gpu/env.sh (build-rel/, carried).
set -u
. bench/gpu/env.sh
for rep in ${SC_REPS:-1 2}; do
  for kind in ${SC_JOBS:-flat moving}; do
    for ms in ${SC_INTERVALS:-10 100}; do
      # the floor: a loop that only sleeps to the same deadlines (bench/speed/tick_floor.c)
      [ -x build-rel/tick_floor ] && build-rel/tick_floor $ms $((5000 / ms))
      for bin in ${SC_BINARIES:-$vl}; do
        d=/tmp/sc-$kind-$ms-$rep
        rm -rf $d
        $bin run --quiet --interval-ms $ms --out $d -- python3 -c "
import torch, time
x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')
t = time.time()
while time.time() - t < ${SC_SECONDS:-10}:
    if '$kind' == 'moving':
        y = torch.empty(256 << 20, dtype=torch.uint8, device='cuda'); torch.cuda.synchronize()
        del y; torch.cuda.empty_cache()
    time.sleep(0.02)"
        python3 - "$d/record.jsonl" $kind $ms "$bin" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ex = [e for e in ev if e["type"] == "exit"][0]
r = {"binary": sys.argv[4], "job": sys.argv[2], "interval_ms": int(sys.argv[3]), "samples": ex["samples"],
     "nvml_reads": ex.get("nvml_reads"), "nvml_cpu_s": ex.get("nvml_cpu_ns", 0) / 1e9, "wall_s": ex["wall_ns"] / 1e9, "sampler_cpu_s": ex["sampler_cpu_ns"] / 1e9,
     "cpu_pct_of_one_core": 100 * ex["sampler_cpu_ns"] / ex["wall_ns"]}
if "sampling_cpu_ns" in ex:  # the loop alone, without vramledger's start
    r["sampling_cpu_pct_of_one_core"] = 100 * ex["sampling_cpu_ns"] / ex["sampling_wall_ns"]
    r["sampling_cpu_us_per_sample"] = ex["sampling_cpu_ns"] / ex["samples"] / 1e3
print(json.dumps(r))
PY
      done
    done
  done
done
