#!/bin/bash
# The probe's question (bench/results/probe/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_probe).
#
# suite probe: Does the probe's bill equal the tensors' bytes and the job's own peak, and what does it cost a step?
#   bench/gpu/run.sh probe first|bit-exact|bill|unnamed|defaults
# (bench/results/probe/: each file's suffix a..e is, in this order, first,
# bit-exact, bill, unnamed, defaults)
# first: the bill on HF models (every step sampled), results with and
#   without the probe, torch.compile, DDP, an OOM with --snapshot.
# bit-exact: what holds the bytes the categories do not name
#   (bench/gpu/jobs/workloads.py unexplained), results bit-exact with and
#   without the probe, step-time overhead, interleaved runs.
# bill: the bill of twelve configurations, an OOM with --snapshot, and the
#   overhead, with the report and doctor of each run.
# unnamed: the blocks the probe leaves unnamed (bench/gpu/jobs/workloads.py unnamed)
#   and the overhead again.
# defaults: the bill with PyTorch's defaults (no deterministic algorithms).
# Writes $OUT/jobs-NAME.jsonl (the jobs' own figures, one line per run, with
# the run's directory) and $OUT/records-NAME.tar.gz (every run record).
# Needs build-rel/ (carry).
#
# suite probe-boundaries: Does the probe name every byte at each phase boundary, and does plan's best configuration run under its commitment?
#   bench/gpu/run.sh probe-boundaries commitment|unnamed|ledger
# (bench/results/probe/README.md#probe-boundaries, parts 1 to 3)
# commitment: the interposer against memory_reserved() under three
#   allocators and a plain CUDA C program's pool, the sampler's cost, a
#   50 ms spike, a plan's best configuration run on the H200 under its
#   commitment, and the guard firing on a job larger than its commitment.
# unnamed: the ledger of six jobs, the blocks left unnamed listed inside the
#   job, HF Trainer and Lightning loops with and without the probe.
# ledger: the ledger of eleven jobs with the allocator's rounding named,
#   Trainer and Lightning; how a statically linked CUDA runtime finds the
#   driver.
# Needs build-rel/ (carry). Results under $OUT, as one .tgz.

suite_probe() {
set -u
. bench/gpu/env.sh
what=${1:?usage: bench/gpu/run.sh probe first|bit-exact|bill|unnamed|defaults}
case $what in
  first|bit-exact|bill|unnamed|defaults) ;;
  *) echo "bench/gpu/run.sh probe: no run '$what' (first|bit-exact|bill|unnamed|defaults)" >&2; exit 2 ;;
esac
mkdir -p "$o"
recs=/tmp/records
mkdir -p $recs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$o/env-$what.txt"
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)" >> "$o/env-$what.txt"
n=0
job() { # job NAME [run flags] -- job args
  name=$1; shift
  n=$((n + 1))
  flags=""
  while [ "$1" != "--" ]; do flags="$flags $1"; shift; done
  shift
  d=$recs/$what-$n-$name
  line=$($vl run --quiet $flags --out "$d" -- python3 bench/gpu/jobs/workloads.py probe "$@" 2>>"$o/errors-$what.txt")
  echo "{\"run\": \"$what-$n-$name\", \"flags\": \"$flags\", \"job\": ${line:-null}}" >> "$o/jobs-$what.jsonl"
}
report() { # the report of the last job, one JSON line, into reports-$what.jsonl
  $vl report "$d" --format json 2>>"$o/errors-$what.txt" | python3 -c "import json,sys; r=json.load(sys.stdin); r['run']='$what-$n-$name'; print(json.dumps(r))" >> "$o/reports-$what.jsonl"
  $vl doctor "$d" --format json 2>>"$o/errors-$what.txt" | python3 -c "import json,sys; r=json.load(sys.stdin); r['run']='$what-$n-$name'; print(json.dumps(r))" >> "$o/doctor-$what.jsonl"
}
if [ "$what" = bill ]; then
  export VRAMLEDGER_PROBE_EVERY=1
  for spec in "gpt2-amp|--model gpt2 --precision amp-bf16" "gpt2-amp-eager|--model gpt2 --precision amp-bf16 --attn eager" \
      "gpt2-bf16|--model gpt2 --precision bf16" "gpt2-amp-ckpt|--model gpt2 --precision amp-bf16 --ckpt" \
      "gpt2-amp-lora|--model gpt2 --precision amp-bf16 --lora 16" "llama-amp|--model llama --precision amp-bf16" \
      "llama-bf16-ckpt|--model llama --precision bf16 --ckpt" "llama-bf16-lora|--model llama --precision bf16 --lora 16" \
      "bert-amp|--model bert --precision amp-bf16" "bert-bf16|--model bert --precision bf16" \
      "gpt2-compile|--model gpt2 --precision amp-bf16 --compile" "gpt2-ddp|--model gpt2 --precision amp-bf16 --ddp"; do
    name=${spec%%|*}
    job "$name" -- ${spec#*|} --steps 6
    report
  done
  name=gpt2-oom
  job gpt2-oom --snapshot -- --model gpt2 --precision amp-bf16 --oom --steps 2
  report
  ls -la "$d" >> "$o/errors-$what.txt"
  unset VRAMLEDGER_PROBE_EVERY
  for i in 1 2 3 4; do
    job gpt2-ovh-probe -- --model gpt2 --precision amp-bf16 --steps 100
    report
    job gpt2-ovh-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --steps 100
  done
elif [ "$what" = defaults ]; then
  # the ledger with PyTorch's defaults (no deterministic algorithms)
  export VRAMLEDGER_PROBE_EVERY=1 PROBE_JOB_NONDETERMINISTIC=1
  for spec in "gpt2-amp|--model gpt2 --precision amp-bf16" "gpt2-bf16|--model gpt2 --precision bf16" \
      "gpt2-amp-ckpt|--model gpt2 --precision amp-bf16 --ckpt" "gpt2-amp-lora|--model gpt2 --precision amp-bf16 --lora 16" \
      "llama-amp|--model llama --precision amp-bf16" "llama-bf16-ckpt|--model llama --precision bf16 --ckpt" \
      "bert-amp|--model bert --precision amp-bf16" "bert-bf16|--model bert --precision bf16"; do
    name=${spec%%|*}
    job "$name" -- ${spec#*|} --steps 4
    report
  done
elif [ "$what" = unnamed ]; then
  for m in "llama amp-bf16" "bert bf16" "gpt2 amp-bf16 ckpt"; do
    python3 bench/gpu/jobs/workloads.py unnamed $m >> "$o/unnamed-$what.jsonl" 2>>"$o/errors-$what.txt"
  done
  for i in 1 2 3 4; do
    job gpt2-ovh-probe -- --model gpt2 --precision amp-bf16 --steps 100
    report
    job gpt2-ovh-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --steps 100
  done
elif [ "$what" = first ]; then
  export VRAMLEDGER_PROBE_EVERY=1
  job gpt2-amp -- --model gpt2 --precision amp-bf16 --steps 6
  job gpt2-amp-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --steps 6
  job gpt2-amp-eager -- --model gpt2 --precision amp-bf16 --attn eager --steps 6
  job gpt2-bf16 -- --model gpt2 --precision bf16 --steps 6
  job gpt2-amp-ckpt -- --model gpt2 --precision amp-bf16 --ckpt --steps 6
  job gpt2-amp-lora -- --model gpt2 --precision amp-bf16 --lora 16 --steps 6
  job llama-amp -- --model llama --precision amp-bf16 --steps 6
  job llama-bf16-ckpt -- --model llama --precision bf16 --ckpt --steps 6
  job llama-bf16-ckpt-noprobe --no-probe -- --model llama --precision bf16 --ckpt --steps 6
  job llama-bf16-lora -- --model llama --precision bf16 --lora 16 --steps 6
  job bert-amp -- --model bert --precision amp-bf16 --steps 6
  job bert-bf16 -- --model bert --precision bf16 --steps 6
  job gpt2-compile -- --model gpt2 --precision amp-bf16 --compile --steps 6
  job gpt2-compile-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --compile --steps 6
  job gpt2-ddp -- --model gpt2 --precision amp-bf16 --ddp --steps 6
  job gpt2-ddp-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --ddp --steps 6
  job gpt2-oom --snapshot -- --model gpt2 --precision amp-bf16 --oom --steps 2
elif [ "$what" = bit-exact ]; then
  python3 bench/gpu/jobs/workloads.py unexplained > "$o/unexplained.json" 2>>"$o/errors-$what.txt"
  export VRAMLEDGER_PROBE_EVERY=1
  job gpt2-amp -- --model gpt2 --precision amp-bf16 --steps 6
  job gpt2-amp-ckpt -- --model gpt2 --precision amp-bf16 --ckpt --steps 6
  job llama-bf16-ckpt -- --model llama --precision bf16 --ckpt --steps 6
  # bit-exact results: eager attention (cuDNN SDPA backward is not deterministic);
  # two runs without the probe show what run-to-run equality to expect
  for i in 1 2; do
    job gpt2-eager-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --attn eager --steps 6
    job gpt2-eager-ddp-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --attn eager --ddp --steps 6
  done
  job gpt2-eager-probe -- --model gpt2 --precision amp-bf16 --attn eager --steps 6
  job gpt2-eager-ddp-probe -- --model gpt2 --precision amp-bf16 --attn eager --ddp --steps 6
  unset VRAMLEDGER_PROBE_EVERY
  for i in 1 2 3 4 5; do
    job gpt2-ovh-probe -- --model gpt2 --precision amp-bf16 --steps 60
    job gpt2-ovh-noprobe --no-probe -- --model gpt2 --precision amp-bf16 --steps 60
  done
  export VRAMLEDGER_PROBE_EVERY=1
  for i in 1 2; do
    job gpt2-ovh-everystep -- --model gpt2 --precision amp-bf16 --steps 60
  done
fi
ls -la $recs/*/ > "$o/ls-$what.txt" 2>&1
tar -C $recs -czf "$o/records-$what.tar.gz" .
}

suite_probe_boundaries() {
set -u
. bench/gpu/env.sh
what=${1:?usage: bench/gpu/run.sh probe-boundaries commitment|unnamed|ledger}
case $what in
  commitment|unnamed|ledger) ;;
  *) echo "bench/gpu/run.sh probe-boundaries: no run '$what' (commitment|unnamed|ledger)" >&2; exit 2 ;;
esac
mkdir -p "$o"
record_env "$o/env-$what.txt"
# report_line NAME DIR WHAT: the record's report (JSON) with its name, one
# line of reports-WHAT.jsonl
report_line() {
  $vl report "$2" --format json 2>>"$o/errors-$3.txt" |
    python3 -c "import json,sys; r=json.load(sys.stdin); r['run']='$1'; print(json.dumps(r))" >> "$o/reports-$3.jsonl"
}
# ledger NAME DIR WHAT CMD...: CMD under `vramledger run` into DIR, its last
# output line into jobs-WHAT.jsonl, its report into reports-WHAT.jsonl
ledger() {
  name=$1 d=$2 tag=$3
  shift 3
  line=$($vl run --quiet --out "$d" -- "$@" 2>>"$o/errors-$tag.txt" | tail -1)
  echo "{\"run\": \"$name\", \"job\": ${line:-null}}" >> "$o/jobs-$tag.jsonl"
  report_line "$name" "$d" "$tag"
}
if [ "$what" = commitment ]; then
  rm -rf /tmp/rec-* /tmp/plan-run /tmp/guard-run /tmp/spike /tmp/sc-*
  # 1a. interposer vs memory_reserved(), three allocators
  for conf in "" "expandable_segments:True" "backend:cudaMallocAsync"; do
    PYTORCH_CUDA_ALLOC_CONF=$conf $vl run --quiet --out "/tmp/rec-$(echo "$conf" | tr -c 'a-zA-Z' _)" -- \
      python3 bench/gpu/jobs/workloads.py interposer-check >> "$o/interposer.jsonl" 2>>"$o/errors-commitment.txt"
  done
  # 1b. a plain CUDA C program's pool against the interposer
  # (the shared runtime, as PyTorch loads it; and nvcc's default, the static one)
  for rt in shared static; do
    nvcc -O2 -cudart $rt -o /tmp/pool_check_$rt bench/gpu/jobs/cuda_checks.cu 2>>"$o/errors-commitment.txt"
    LD_PRELOAD=$VRAMLEDGER_PRELOAD /tmp/pool_check_$rt pool-check | sed "s/^{/{\"cudart\": \"$rt\", /" >> "$o/pool_check.jsonl" 2>>"$o/errors-commitment.txt"
  done
  # 1c. the sampler's cost; 1d. a 50 ms spike at 10 ms
  VL_SUITE=sampler-cost bash bench/gpu/interposer.sh > "$o/sampler_cost.jsonl" 2>>"$o/errors-commitment.txt"
  $vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/gpu/jobs/workloads.py spike
  $vl report /tmp/spike --format json > "$o/spike_report.json" 2>>"$o/errors-commitment.txt"
  # 9a. plan -> commit --plan -> run under the commitment -> audit
  $vl plan --model llama-2-7b --precision bf16 --optimizer adamw --seq 2048 --global-batch 16 \
    --tokens 1000000000 --gpus h200 --max-gpus 1 --format json > "$o/plan.json"
  $vl commit --plan "$o/plan.json" --out "$o/commit" > "$o/commit.txt" 2>&1
  cfg=$(python3 -c "
import json; s = json.load(open('$o/plan.json'))['best']['settings']
print(json.dumps({'name': 'plan-best', 'model': 'llama-2-7b', 'precision': s['precision'],
  'optimizer': s['optimizer'], 'optimizer_impl': s['optimizer_impl'], 'attention': s['attention'],
  'checkpointing': s['checkpointing'], 'batch': s['batch'], 'seq': s['seq'],
  'grad_accum': s['grad_accum'], 'lora': s['lora_rank']}))")
  echo "$cfg" > "$o/plan_config.json"
  $vl run --quiet --commitment "$o/commit/commitment.json" --out /tmp/plan-run -- \
    python3 python/vramledger/measure.py "$o/plan_measure.json" --config "$cfg" > "$o/plan_run.txt" 2>&1
  echo "run exit $?" >> "$o/plan_run.txt"
  $vl audit --commitment "$o/commit/commitment.json" --run /tmp/plan-run > "$o/plan_audit.txt" 2>&1
  echo "audit exit $?" >> "$o/plan_audit.txt"
  $vl report /tmp/plan-run --format json > "$o/plan_report.json" 2>>"$o/errors-commitment.txt"
  # 9b. the guard: a commitment for micro-batch 1, a job at micro-batch 4
  $vl commit --model llama-2-7b --precision bf16 --optimizer adamw --batch 1 --seq 2048 --gpu h200 \
    --out "$o/commit-mb1" > /dev/null 2>&1
  cfg4=$(echo "$cfg" | sed 's/"plan-best"/"mb4-over-mb1-commitment"/')
  $vl run --commitment "$o/commit-mb1/commitment.json" --out /tmp/guard-run -- \
    python3 python/vramledger/measure.py "$o/guard_measure.json" --config "$cfg4" > "$o/guard_run.txt" 2>&1
  echo "run exit $?" >> "$o/guard_run.txt"
  cp /tmp/guard-run/fallback "$o/guard_fallback.jsonl" 2>>"$o/errors-commitment.txt"
  grep '"trigger"' /tmp/guard-run/record.jsonl > "$o/guard_trigger_events.jsonl"
  $vl audit --commitment "$o/commit-mb1/commitment.json" --run /tmp/guard-run > "$o/guard_audit.txt" 2>&1
  echo "audit exit $?" >> "$o/guard_audit.txt"
  tar -C /tmp -cJf "$o/records-commitment.tar.xz" plan-run guard-run spike rec-backend_cudaMallocAsync_ 2>>"$o/errors-commitment.txt"
fi
if [ "$what" = unnamed ]; then
  rm -rf /tmp/rec2
  export VRAMLEDGER_PROBE_EVERY=1
  n=0
  for spec in "gpt2-amp|--model gpt2 --precision amp-bf16" "gpt2-amp-ckpt|--model gpt2 --precision amp-bf16 --ckpt" \
      "llama-amp|--model llama --precision amp-bf16" "llama-bf16-ckpt|--model llama --precision bf16 --ckpt" \
      "bert-bf16|--model bert --precision bf16" "gpt2-ddp|--model gpt2 --precision amp-bf16 --ddp"; do
    n=$((n + 1)); name=${spec%%|*}; args=${spec#*|}
    ledger "$n-$name" "/tmp/rec2/$n-$name" unnamed python3 bench/gpu/jobs/workloads.py probe $args
  done
  for m in "llama|amp-bf16" "bert|bf16"; do
    mm=${m%%|*}; pr=${m#*|}
    $vl run --quiet --out /tmp/rec2/unnamed-$mm -- python3 bench/gpu/jobs/workloads.py probe --model $mm --precision $pr --steps 4 --unnamed-out "$o/unnamed-$mm-probe.json" > /dev/null 2>>"$o/errors-unnamed.txt"
    report_line "unnamed-$mm" "/tmp/rec2/unnamed-$mm" unnamed
    VRAMLEDGER_PROBE=0 python3 bench/gpu/jobs/workloads.py probe --model $mm --precision $pr --steps 4 --unnamed-out "$o/unnamed-$mm-plain.json" > /dev/null 2>>"$o/errors-unnamed.txt"
  done
  for loop in trainer lightning; do
    ledger "loop-$loop" "/tmp/rec2/loop-$loop" unnamed python3 bench/gpu/jobs/workloads.py loops --loop $loop
    plain=$(VRAMLEDGER_PROBE=0 python3 bench/gpu/jobs/workloads.py loops --loop $loop 2>>"$o/errors-unnamed.txt" | tail -1)
    echo "{\"run\": \"loop-$loop-plain\", \"job\": ${plain:-null}}" >> "$o/jobs-unnamed.jsonl"
  done
  tar -C /tmp -cJf "$o/records-unnamed.tar.xz" rec2 2>>"$o/errors-unnamed.txt"
fi
if [ "$what" = ledger ]; then
  # the ledger again with rounding named, Trainer and Lightning;
  # how a statically linked CUDA runtime finds the driver
  rm -rf /tmp/rec3
  export VRAMLEDGER_PROBE_EVERY=1
  n=0
  for spec in "gpt2-amp|--model gpt2 --precision amp-bf16" "gpt2-amp-eager|--model gpt2 --precision amp-bf16 --attn eager" \
      "gpt2-bf16|--model gpt2 --precision bf16" "gpt2-amp-ckpt|--model gpt2 --precision amp-bf16 --ckpt" \
      "gpt2-amp-lora|--model gpt2 --precision amp-bf16 --lora 16" "llama-amp|--model llama --precision amp-bf16" \
      "llama-bf16-ckpt|--model llama --precision bf16 --ckpt" "llama-bf16-lora|--model llama --precision bf16 --lora 16" \
      "bert-amp|--model bert --precision amp-bf16" "bert-bf16|--model bert --precision bf16" \
      "gpt2-ddp|--model gpt2 --precision amp-bf16 --ddp"; do
    n=$((n + 1)); name=${spec%%|*}; args=${spec#*|}
    ledger "$n-$name" "/tmp/rec3/$n-$name" ledger python3 bench/gpu/jobs/workloads.py probe $args
  done
  for loop in trainer lightning; do
    ledger "loop-$loop" "/tmp/rec3/loop-$loop" ledger python3 bench/gpu/jobs/workloads.py loops --loop $loop
  done
  nvcc -O2 -o /tmp/pool_check_static bench/gpu/jobs/cuda_checks.cu 2>>"$o/errors-ledger.txt"
  LD_DEBUG=bindings LD_PRELOAD=$VRAMLEDGER_PRELOAD /tmp/pool_check_static pool-check 2>&1 >/dev/null \
    | grep -E "symbol .(dlsym|dlvsym|dlopen|cuGetProcAddress|__libc_dlsym)" | sort | uniq -c | head -40 > "$o/static_cudart_bindings.txt"
  tar -C /tmp -cJf "$o/records-ledger.tar.xz" rec3 2>>"$o/errors-ledger.txt"
fi
# the device hands back a few files a call: everything goes back as one
tar -C "$o" -czf /tmp/results-$what.tgz . && rm -rf "$o"/* && mv /tmp/results-$what.tgz "$o/"
}

suite=${VL_SUITE:-probe}
"suite_${suite//-/_}" "$@"
