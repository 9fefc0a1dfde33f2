#!/bin/bash
# What `vramledger run` sees and costs: the interposer, the sampler, and whether measuring moves a job's peak (bench/results/run-interposer/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_interposer).
#
# suite interposer: Does the interposer see what PyTorch reserves, and what do `run`, the interposer and the sampler cost?
#   bench/gpu/run.sh interposer   (IP_REPS: the overhead's repeats each way, default 5)
# (bench/results/run-interposer/) Writes into $OUT: interposer.jsonl,
# overhead.jsonl, alloc_bench.jsonl, sampler.json, the spike's report and
# record, and the run records. Needs build-rel/ (carry).
#
# suite spike: Do the sampler (at 10 ms) and the interposer's peak both catch a 2 GiB allocation held for 50 ms?
#   bench/gpu/run.sh spike
# bench/gpu/jobs/workloads.py spike under `vramledger run --interval-ms 10`; writes
# $OUT/spike_report.json and spike_record.jsonl (bench/results/run-interposer/,
# generate-reserve/sampler-spike/). Needs build-rel/ (carry).
#
# suite preload-table: How long can an allocation wait in the interposer with 8 threads on this host's cores?
#   bench/gpu/run.sh preload-table [OTHER_PRELOAD.so ...]   (PT_PAIRS, PT_BURST: pairs a
#   thread and the burst held at once, default 12.5 M and 2 M: 10^8 pairs; PT_LIMIT_S:
#   seconds each run may take, default 300)
# bench/speed/preload_table.c (build-rel/preload_table) on the tests' stub CUDA
# driver (build-rel/tests/stub) under build-rel's interposer, then under each
# OTHER_PRELOAD.so, each under /usr/bin/time -v: $OUT/preload-table/<name>.txt
# is the program's line and time's, machine.txt the cores and kernel.
#
# suite sampler-cost: What does the sampler cost a core while a job holds or moves GPU memory?
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
#
# suite gc-timing: Does the timing of Python's garbage collector move a job's peak reserved?
#   bench/gpu/run.sh gc-timing [NAME...]   (default: deberta3-amp-adamw-eager)
# Each entry of measure.py's suites runs three times on the GPU: as the
# suites measure it, with the cyclic collector off (gc.disable()), and
# collecting often (gc.set_threshold(50)); one measure.py record each,
# $OUT/NAME.{default,off,often}.json. A job whose tensors die in reference
# cycles frees them when the collector runs: a tracer that allocates
# Python objects runs it at other moments.
#
# suite perturb: Does measuring a job change its peak reserved? Each layer on and off.
#   bench/gpu/run.sh perturb [NAME...]   (default: deberta3-amp-adamw-eager roberta-amp-adamw)
# Each entry of measure.py's suites runs on the GPU six ways: alone; under
# `vramledger run` (interposer and probe), `run --no-preload` (the probe
# alone), `run --no-probe` (the interposer alone); under `vramledger trace`
# (tracer and probe) and `trace` with VRAMLEDGER_PROBE=0 (the tracer
# alone). One measure.py record each, $OUT/NAME.MODE.json, and a line
# NAME MODE peak_allocated peak_reserved in $OUT/summary.txt.

suite_interposer() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$o/env.txt"
python3 -c "import torch;print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$o/env.txt"

# 1. interposer live bytes vs torch.cuda.memory_reserved(), three allocators
for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
  PYTORCH_CUDA_ALLOC_CONF=$conf $vl run --quiet --out "/tmp/rec-$(echo "$conf" | tr -c 'a-zA-Z' _)" -- \
    python3 bench/gpu/jobs/workloads.py interposer-check >> "$o/interposer.jsonl" 2>>"$o/errors.txt"
done

# 2. overhead on a GPT-2 training loop, interleaved, IP_REPS repeats each way
for i in $(seq "${IP_REPS:-5}"); do
  echo "{\"with\": false, \"r\": $(python3 bench/gpu/jobs/workloads.py gpt2-loop 40 2>>"$o/errors.txt")}" >> "$o/overhead.jsonl"
  echo "{\"with\": true, \"r\": $($vl run --quiet --out /tmp/ovh-$i -- python3 bench/gpu/jobs/workloads.py gpt2-loop 40 2>>"$o/errors.txt")}" >> "$o/overhead.jsonl"
done

# 3. cudaMalloc/cudaFree pairs with and without the interposer
nvcc -O2 -o /tmp/alloc_bench bench/gpu/jobs/cuda_checks.cu 2>>"$o/errors.txt"
for i in 1 2 3; do
  echo "{\"preload\": false, \"r\": $(/tmp/alloc_bench alloc-bench 1000000)}" >> "$o/alloc_bench.jsonl"
  echo "{\"preload\": true, \"r\": $(LD_PRELOAD=$VRAMLEDGER_PRELOAD /tmp/alloc_bench alloc-bench 1000000)}" >> "$o/alloc_bench.jsonl"
done

# 4. the sampler's own cost at 100 Hz, and a 50 ms spike caught
python3 -c "
import resource, subprocess, sys, time
t = time.time()
subprocess.run(sys.argv[1:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print('{\"user_s\": %.3f, \"sys_s\": %.3f, \"wall_s\": %.3f}' % (r.ru_utime, r.ru_stime, time.time() - t))
" $vl run --quiet --interval-ms 10 --out /tmp/idle -- sleep 10 > "$o/sampler.json"
$vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/gpu/jobs/workloads.py spike
$vl report /tmp/spike --format json > "$o/spike_report.json"
cp /tmp/spike/record.jsonl "$o/spike_record.jsonl"
$vl report "/tmp/rec-_" --format json > "$o/interposer_default_report.json" 2>/dev/null
ls /tmp | grep rec- >> "$o/errors.txt"
}

suite_spike() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env-spike.txt"
rm -rf /tmp/spike
$vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/gpu/jobs/workloads.py spike
$vl report /tmp/spike --format json > "$o/spike_report.json"
cp /tmp/spike/record.jsonl "$o/spike_record.jsonl"
}

suite_preload_table() {
set -u
. bench/gpu/env.sh
d=$o/preload-table
mkdir -p "$d"
{ nproc; lscpu | grep 'Model name'; uname -r; date -u; } > "$d/machine.txt"
for so in "$PWD/build-rel/libvramledger-preload.so" "$@"; do
  n=$(basename "$so" .so)
  timeout "${PT_LIMIT_S:-300}" /usr/bin/time -v env LD_PRELOAD="$so" \
    LD_LIBRARY_PATH="$PWD/build-rel/tests/stub" build-rel/preload_table 8 \
    "${PT_PAIRS:-12500000}" "${PT_BURST:-2000000}" > "$d/$n.txt" 2>&1
  echo "$n: exit $?"
done
}

suite_sampler_cost() {
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
}

suite_gc_timing() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
for n in "${@:-deberta3-amp-adamw-eager}"; do
  for mode in default off often; do
    python3 - "$mode" "$o/$n.$mode.json" "$n" <<'PY'
import gc, runpy, sys
mode, out, name = sys.argv[1:4]
if mode == "off":
    gc.disable()
elif mode == "often":
    gc.set_threshold(50)
sys.argv = ["measure.py", out, "--in-process", "--suite", name]
runpy.run_path("python/vramledger/measure.py", run_name="__main__")
PY
  done
done
}

suite_perturb() {
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env.txt"
m=python/vramledger/measure.py
names=("$@")
[ ${#names[@]} = 0 ] && names=(deberta3-amp-adamw-eager roberta-amp-adamw)
for n in "${names[@]}"; do
  for mode in alone run probe interposer trace tracer; do
    j=$o/$n.$mode.json
    job=(python3 $m $j --in-process --suite $n)
    w=/tmp/perturb-$n-$mode
    rm -rf $w
    case $mode in
    alone) "${job[@]}" ;;
    run) $vl run --quiet --out $w -- "${job[@]}" ;;
    probe) $vl run --quiet --no-preload --out $w -- "${job[@]}" ;;
    interposer) $vl run --quiet --no-probe --out $w -- "${job[@]}" ;;
    trace) $vl trace --out $w -- "${job[@]}" > /dev/null ;;
    tracer) VRAMLEDGER_PROBE=0 $vl trace --out $w -- "${job[@]}" > /dev/null ;;
    esac > "$o/$n.$mode.log" 2>&1
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['runs'][0]['measured']
print(sys.argv[2], sys.argv[3], r['peak_allocated'], r['peak_reserved'])" "$j" "$n" "$mode" >> "$o/summary.txt" 2>&1
  done
done
cat "$o/summary.txt"
}

suite=${VL_SUITE:-interposer}
"suite_${suite//-/_}" "$@"
