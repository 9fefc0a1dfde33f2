#!/bin/sh
# How fast is vramledger? One question a name, its table a section of
# bench/results/speed/README.md (where each figure came from and when).
#   sh bench/speed/run.sh NAME [ARGS]      (sh bench/speed/run.sh: the names)
# Each runs in a subshell of its own, from the directory it was started in
# unless it changes to the repository root itself; the C and Python
# programs some of them run (caching_bench.c, tick_floor.c, preload_table.c,
# jobs.py dry-run, jobs.py probe-cost) are beside this file.
here=$(cd "$(dirname "$0")" && pwd)

# --- estimate
# Speed of `vramledger estimate`, process start to exit (the target: one estimate
# under 20 ms, --max-batch under 100 ms). Uses hyperfine (Debian package).
# Writes a Markdown summary to the file given (default: stdout).
estimate() (
set -eu
command -v hyperfine >/dev/null || { echo "bench/speed/run.sh estimate needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
cd "$here/../.."
bin=${VL_BIN:-build/vramledger}
out=${1:-/dev/stdout}
tmp=$(mktemp -d)
hyperfine -N -i --warmup 20 --runs 200 --export-json "$tmp/est.json" \
  "$bin estimate --model llama-3-8b --batch 4 --seq 2048 --gpu h100-80gb" \
  "$bin estimate --model mixtral-8x7b --batch 2 --seq 4096 --dp 8 --zero 3 --explain --format json" \
  "$bin estimate --model llama-2-7b --lora-rank 16 --qlora --gpu l4 --max-batch" \
  "$bin estimate --model llama-3-8b --checkpointing full --gpu h200 --max-seq" >/dev/null 2>&1 || true
python3 - "$tmp/est.json" >"$out" <<'PY'
import json, platform, subprocess, sys
d = json.load(open(sys.argv[1]))
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(f"# estimate speed ({platform.node()}, {cpu}, {subprocess.getoutput('nproc')} cores)\n")
print("| command | mean ms | median ms | max ms | runs | target |")
print("|---|---:|---:|---:|---:|---|")
for r in d["results"]:
    target = "< 100 ms" if "--max-" in r["command"] else "< 20 ms"
    cmd = r["command"].split("estimate", 1)[1].strip()
    print(f"| `{cmd}` | {r['mean']*1e3:.2f} | {r['median']*1e3:.2f} | {r['max']*1e3:.2f} | "
          f"{len(r['times'])} | {target} |")
PY
rm -rf "$tmp"
)

# --- plan
# Speed of `vramledger plan` (the target: searching 10^5 candidates under 1 s):
# a search of 116,376 configurations, printed as the top-15 table (the
# search) and as JSON with every feasible candidate (search + rendering).
# Uses hyperfine (Debian package).
plan() (
set -eu
cd "$here/../.."
command -v hyperfine >/dev/null || { echo "bench/speed/run.sh plan needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
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
)

# --- sensitivity
# Speed of `vramledger sensitivity` (the target: 10^5 samples under 1 s),
# fallbacks included: GPT-2 with one spread (every draw estimated), the
# Llama-3-8B LoRA query with three spreads and Llama-2-7B full fine-tuning
# with two and a budget (more distinct jobs than --estimates: the draws on
# the response surface, checked against exact estimates).
#   VL_BIN=build-rel/vramledger [VL_BIN_BEFORE=old/vramledger] bench/speed/run.sh sensitivity
sensitivity() (
set -eu
cd "$here/../.."
bin=${VL_BIN:-build-rel/vramledger}
q1="sensitivity --model gpt2 --batch 8 --seq 1024 --vary seq=±20% --gpus h100-80gb,l4 --samples 100000"
q2="sensitivity --model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200 --samples 100000"
q3="sensitivity --model llama-2-7b --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --gpu h100 --budget 100 --tokens 1000000000"
echo "| binary | query | draws taken | evaluator | estimates | check's largest error, memory / time % | user s (best of 3) |"
echo "|---|---|---:|---|---:|---|---:|"
for b in ${VL_BIN_BEFORE:-} "$bin"; do
  name=after
  [ "$b" = "$bin" ] || name=before
  for q in "$q1" "$q2" "$q3"; do
    # shellcheck disable=SC2086
    info=$("$b" $q --format json | python3 -c "
import json, sys
d = json.load(sys.stdin)
s = d.get('surface')
e = '%.2f / %.2f' % (s['max_error_pct']['memory'], s['max_error_pct']['time']) if s else '-'
print(d['drawn'], d['evaluator'], d['estimates'], e.replace(' ', '_'))")
    best=
    for _ in 1 2 3; do
      # shellcheck disable=SC2086
      t=$( { /usr/bin/time -f %U "$b" $q >/dev/null; } 2>&1 )
      best=$(python3 -c "print(min(float(x) for x in '$t $best'.split()))")
    done
    set -- $info
    echo "| $name | \`$q\` | $1 | $2 | $3 | $(echo "$4" | tr _ ' ') | $best |"
  done
done
)

# --- sensitivity-lora
# Speed of `vramledger sensitivity` on the Llama-3-8B LoRA query with three
# spreads, where nearly every draw is a new job (a full estimate, replay
# and all): the query at the default --estimates, the time of one estimate
# (from the difference of --estimates 256 and 1280), the distinct jobs the
# 10^5 draws hold, and the pass that estimates all of them.
#   VL_BIN=build/vramledger [VL_BIN_BEFORE=old/vramledger] bench/speed/run.sh sensitivity-lora
# Prints Markdown (bench/results/speed/README.md#sensitivity-lora).
sensitivity_lora() (
set -eu
cd "$here/../.."
bin=${VL_BIN:-build-rel/vramledger}
q="sensitivity --model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200 --samples 100000"

# user seconds of one run (best of $2), and "drawn estimates" of its JSON
user_s() {
  best=
  for _ in $(seq "$2"); do
    # shellcheck disable=SC2086
    t=$( { /usr/bin/time -f %U "$3" $q $1 >/dev/null; } 2>&1 )
    best=$(python3 -c "print(min(float(x) for x in '$t $best'.split()))")
  done
  echo "$best"
}
facts() {
  # shellcheck disable=SC2086
  "$2" $q $1 --format json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['drawn'], d['estimates'], d.get('distinct_jobs'))"
}

set -- $(facts "" "$bin")
distinct=$3
echo "| binary | --estimates | draws taken | distinct jobs estimated | user s |"
echo "|---|---:|---:|---:|---:|"
for b in ${VL_BIN_BEFORE:-} "$bin"; do
  name=after
  [ "$b" = "$bin" ] || name=before
  for e in 1024 256 1280 "$distinct"; do
    reps=3
    [ "$e" = "$distinct" ] && reps=1
    s=$(user_s "--estimates $e" $reps "$b")
    set -- $(facts "--estimates $e" "$b")
    echo "| $name | $e | $1 | $2 | $s |"
  done
done
echo
echo "the 100000 draws hold $distinct distinct jobs"
)

# --- estimate-identical
# Did a change to speed leave every estimate as it was? `estimate` of every
# bundled model (data/models), training and inference, text and JSON, by
# two binaries, compared byte for byte; and `sensitivity` of the GPT-2 and
# Llama-3-8B LoRA queries (JSON, `distinct_jobs` set aside where only one
# binary has it).
#   VL_BIN_BEFORE=old/vramledger VL_BIN=new/vramledger bench/speed/run.sh estimate-identical
estimate_identical() (
set -eu
cd "$here/../.."
before=${VL_BIN_BEFORE:?give VL_BIN_BEFORE}
after=${VL_BIN:-build-rel/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
differ=0
for m in data/models/*.json; do
  for job in "--batch 2 --seq 256" "--task infer --batch 2 --seq 128 --new-tokens 32" \
    "--precision bf16 --lora-rank 16 --batch 2 --seq 256"; do
    for fmt in text json; do
      n=$((n + 1))
      # shellcheck disable=SC2086
      "$before" estimate --model "$m" $job --format $fmt >"$tmp/a" 2>&1 || true
      # shellcheck disable=SC2086
      "$after" estimate --model "$m" $job --format $fmt >"$tmp/b" 2>&1 || true
      if ! cmp -s "$tmp/a" "$tmp/b"; then
        echo "differs: estimate --model $m $job --format $fmt"
        differ=$((differ + 1))
      fi
    done
  done
done
for q in "--model gpt2 --batch 8 --seq 1024 --vary seq=±20% --gpus h100-80gb,l4" \
  "--model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$before" sensitivity $q --format json | grep -v '"distinct_jobs"' >"$tmp/a"
  # shellcheck disable=SC2086
  "$after" sensitivity $q --format json | grep -v '"distinct_jobs"' >"$tmp/b"
  if ! cmp -s "$tmp/a" "$tmp/b"; then
    echo "differs: sensitivity $q"
    differ=$((differ + 1))
  fi
done
echo "$n outputs compared, $differ differ"
[ "$differ" = 0 ]
)

# --- fit
# fit's speed: synthetic sweeps of 10^4, 10^5 and 10^6 rows (batch, seq,
# peak_bytes with 2 % noise), fitted with three terms; wall seconds and
# peak RSS of `vramledger fit --csv` (bench/results/speed/README.md#fit).
#   sh bench/speed/run.sh fit [VRAMLEDGER]
fit() (
set -eu
vl=${1:-build-release/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 10000 100000 1000000; do
  python3 - "$n" "$tmp/fit.csv" <<'P'
import random, sys
random.seed(1)
n, path = int(sys.argv[1]), sys.argv[2]
with open(path, "w") as f:
    f.write("batch,seq,peak_bytes,status\n")
    for _ in range(n):
        b, s = random.randint(1, 64), random.randint(64, 8192)
        f.write("%d,%d,%.0f,ok\n" % (b, s, (1e9 + 3e5 * b * s + 40 * b * s * s) * (1 + random.uniform(-0.02, 0.02))))
P
  /usr/bin/time -f "$n rows: %e s wall, %M KiB peak RSS" "$vl" fit --csv "$tmp/fit.csv" \
    --terms const,bs,batch*seq^2 >/dev/null
done
)

# --- report-1gib
# report's speed on a 1 GiB record: a synthetic record of 8 GPUs sampled
# every 100 ms (with processes, the interposer's alloc lines and marks
# between, as `vramledger run` writes them) grown past 1 GiB, then
# `vramledger report` timed in its formats (wall seconds and peak RSS);
# the target is under 30 s (bench/results/speed/README.md#report-1gib).
#   sh bench/speed/run.sh report-1gib [VRAMLEDGER]
report_1gib() (
set -eu
vl=${1:-build-release/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
python3 - "$tmp/run/record.jsonl" <<'P'
import sys
G = 1 << 30
with open(sys.argv[1], "w", buffering=1 << 24) as f:
    f.write('{"type":"meta","schema":"vramledger.run/1","t_ns":0,"start_unix_ms":1764547200000,'
            '"command":["torchrun","--nproc-per-node","8","train.py"],"host":"node-a",'
            '"interval_ms":100,"nvml":"ok","driver":"580.159.04","gpus":[%s]}\n' % ",".join(
                '{"index":%d,"name":"NVIDIA H200","uuid":"GPU-%04d","total_bytes":150109880320}'
                % (g, g) for g in range(8)))
    n = 0
    while f.tell() < 1 << 30:
        t = n * 100000000
        used = 20 * G + (n % 600) * (8 << 20)  # a sawtooth: a step's growth, then freed
        gpus = ",".join('{"i":%d,"used":%d,"tree":%d,"util":97}' % (g, used + G, used)
                        for g in range(8))
        procs = ",".join('{"pid":%d,"gpu":%d,"bytes":%d}' % (100 + g, g, used) for g in range(8))
        f.write('{"type":"sample","t_ns":%d,"gpus":[%s],"procs":[%s],"tree_bytes":%d,'
                '"tree_procs":8,"other_bytes":0,"cuda_alloc_bytes":%d}\n'
                % (t, gpus, procs, 8 * used, 8 * (used - G)))
        if n % 10 == 0:
            for g in range(8):
                f.write('{"type":"alloc","t_ns":%d,"pid":%d,"live":%d,"peak":%d,"allocs":%d,'
                        '"frees":%d,"pools":0,"libs":{"libc10_cuda.so":%d}}\n'
                        % (t + 1000 + g, 100 + g, used - G, used - G, n, n, used - G))
            f.write('{"type":"mark","t_ns":%d,"pid":100,"name":"step"}\n' % (t + 2000))
        n += 1
    f.write('{"type":"exit","t_ns":%d,"status":0,"samples":%d}\n' % (n * 100000000, n))
    print("%d samples, %.2f GiB" % (n, f.tell() / G))
P
for fmt in json text; do
  /usr/bin/time -f "report --format $fmt: %e s wall, %M KiB peak RSS" \
    "$vl" report "$tmp/run" --format "$fmt" >"$tmp/out.$fmt"
done
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('read back: samples %d, peak process_bytes %d' % (d['samples'], d['peak']['process_bytes']))
" "$tmp/out.json"
)

# --- sampler-cost
# The sampling loop's own CPU share on the development machine (no GPU:
# the fake NVML of the tests, the interposer on the stub CUDA runtime, a
# job holding 64 MiB for 5 s), for the vramledger binaries given,
# interleaved, at each interval. The fake NVML costs nothing: this
# measures vramledger's own side (counters, formatting, writing,
# sleeping), not NVML's. Before each interval's runs, the floor: what a
# loop that only sleeps to the same deadlines costs (one JSON line with
# "floor": true).
#   sh bench/speed/run.sh sampler-cost [--interval-ms "1 10 100"] [--reps N] BINARY...
# (after a build of build-rel/ with its tests: cmake -S . -B build-rel
# -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel)
sampler_cost() (
set -u
intervals=10 reps=3
while [ $# -gt 0 ]; do
  case $1 in
  --interval-ms) intervals=$2; shift 2 ;;
  --reps) reps=$2; shift 2 ;;
  *) break ;;
  esac
done
cd "$here/../.."
stub=$PWD/build-rel/tests/stub fake=$PWD/build-rel/tests/fake/libnvidia-ml.so.1
# the floor: a loop that only sleeps as the sampler does (bench/speed/tick_floor.c)
floor=$(mktemp)
cc -O2 -o "$floor" bench/speed/tick_floor.c || floor=
rep=1
while [ $rep -le "$reps" ]; do
  for ms in $intervals; do
    [ -n "$floor" ] && "$floor" "$ms" $((5000 / ms))
    for bin in "$@"; do
      d=$(mktemp -d)
      LD_LIBRARY_PATH=$stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} VRAMLEDGER_NVML_LIB=$fake VRAMLEDGER_PROBE=0 \
        VRAMLEDGER_PRELOAD=$PWD/build-rel/libvramledger-preload.so \
        "$bin" run --quiet --interval-ms "$ms" --out "$d/r" -- build-rel/tests/preload_test hold 64 5
      tail -1 "$d/r/record.jsonl" | python3 -c "
import json, sys
e = json.load(sys.stdin)
print(json.dumps({'binary': '$bin', 'interval_ms': $ms, 'rep': $rep, 'samples': e['samples'],
  'sampling_cpu_us_per_sample': round(e['sampling_cpu_ns'] / e['samples'] / 1e3, 2),
  'sampling_cpu_pct_of_one_core': round(100 * e['sampling_cpu_ns'] / e['sampling_wall_ns'], 3),
  'all_cpu_pct_of_one_core': round(100 * e['sampler_cpu_ns'] / e['wall_ns'], 3)}))"
      rm -rf "$d"
    done
  done
  rep=$((rep + 1))
done
[ -n "$floor" ] && rm -f "$floor"
)

# --- preload-table
# How long can an allocation wait on the interposer's lock, and does its
# pointer table stay the size of what is live? bench/speed/preload_table.c on the
# stub CUDA driver of the tests, under this build's interposer and, given a
# second one (another build, e.g. an older commit's), under that one too.
# Usage: bench/speed/run.sh preload-table BUILD_DIR [OTHER_PRELOAD.so] [THREADS PAIRS BURST]
preload_table() (
set -eu
b=${1:?usage: bench/speed/run.sh preload-table BUILD_DIR [OTHER_PRELOAD.so] [THREADS PAIRS BURST]}
other=${2:-}
threads=${3:-8}
pairs=${4:-2000000}
burst=${5:-2000000}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cc -O2 -o "$d/preload_table" "$here/preload_table.c" -ldl -lpthread
for pre in "$b/libvramledger-preload.so" $other; do
  printf '%s: ' "$pre"
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$b/tests/stub "$d/preload_table" "$threads" "$pairs" "$burst"
done
)

# --- probe-cost
# The probe's own time on steps it does not sample, on this machine's CPU
# (Debian's torch), for the python/ tree given (default: this checkout's).
# Prints the median probe_ns and step time of the unsampled steps.
#   sh bench/speed/run.sh probe-cost [PYTHON_DIR]
probe_cost() (
set -eu
cd "$here/../.."
py=${1:-$PWD/python}
d=$(mktemp -d)
PATH=/usr/bin:$PATH VRAMLEDGER_PYTHON_DIR=$py VRAMLEDGER_DATA=$PWD/data \
  build/vramledger run --quiet --no-preload --out "$d/r" -- /usr/bin/python3 bench/speed/jobs.py probe-cost
/usr/bin/python3 - "$d/r/record.jsonl" <<'PY'
import json, statistics, sys
st = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
xs = [s for s in st if not s["sampled"]]
p = statistics.median(s["probe_ns"] for s in xs) / 1000
t = statistics.median(s["time_ns"] for s in xs) / 1e6
print("%d unsampled steps: probe %.1f us, step %.2f ms, %.2f %%" % (len(xs), p, t, 100 * p / 1000 / t))
PY
rm -rf "$d"
)

# --- dry-run
# How long does a meta dry run of a 7B model take on this machine?
# bench/speed/jobs.py dry-run (Llama-2-7B's shape in plain PyTorch, bf16, AdamW,
# 2 steps, batch 1 x 2048) under `vramledger trace` on meta tensors; prints
# the wall time, the peak memory of the whole dry run (RSS) and the replay.
# Usage: bench/speed/run.sh dry-run [VRAMLEDGER] [PYTHON]
dry_run() (
set -eu
vl=${1:-build-release/vramledger}
py=${2:-python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/time -f "wall %e s, max RSS %M KiB" "$vl" trace --out "$d/run" --gpu h200 --format json -- \
  "$py" "$here/jobs.py" dry-run > "$d/out.json" 2> "$d/err"
tail -1 "$d/err"
"$py" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['replays'][0]; print('events', d['events'], 'complete', d['complete'], 'peak allocated %.2f GiB, reserved %.2f GiB' % (r['peak_allocated_bytes']/2**30, r['peak_reserved_bytes']/2**30))" "$d/out.json"
)

case ${1:-} in
estimate) shift; estimate "$@" ;;
plan) shift; plan "$@" ;;
sensitivity) shift; sensitivity "$@" ;;
sensitivity-lora) shift; sensitivity_lora "$@" ;;
estimate-identical) shift; estimate_identical "$@" ;;
fit) shift; fit "$@" ;;
report-1gib) shift; report_1gib "$@" ;;
sampler-cost) shift; sampler_cost "$@" ;;
preload-table) shift; preload_table "$@" ;;
probe-cost) shift; probe_cost "$@" ;;
dry-run) shift; dry_run "$@" ;;
*)
  echo "usage: sh bench/speed/run.sh NAME [ARGS], NAME one of:" >&2
  echo "  estimate            Speed of \`vramledger estimate\`, process start to exit (the target: one estimate" >&2
  echo "  plan                Speed of \`vramledger plan\` (the target: searching 10^5 candidates under 1 s):" >&2
  echo "  sensitivity         Speed of \`vramledger sensitivity\` (the target: 10^5 samples under 1 s), every" >&2
  echo "  sensitivity-lora    Speed of \`vramledger sensitivity\` on the Llama-3-8B LoRA query with three" >&2
  echo "  estimate-identical  Did a change to speed leave every estimate as it was? \`estimate\` of every" >&2
  echo "  fit                 fit's speed: synthetic sweeps of 10^4, 10^5 and 10^6 rows (batch, seq," >&2
  echo "  report-1gib         report's speed on a 1 GiB record: a synthetic record of 8 GPUs sampled" >&2
  echo "  sampler-cost        The sampling loop's own CPU share on the development machine (no GPU:" >&2
  echo "  preload-table       How long can an allocation wait on the interposer's lock, and does its" >&2
  echo "  probe-cost          The probe's own time on steps it does not sample, on this machine's CPU" >&2
  echo "  dry-run             How long does a meta dry run of a 7B model take on this machine?" >&2
  exit 2 ;;
esac
