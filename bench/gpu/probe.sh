#!/bin/bash
# Does the probe's bill equal the tensors' bytes and the job's own peak, and what does it cost a step?
#   bench/gpu/run.sh probe first|bit-exact|bill|unnamed|defaults
# (bench/results/probe/: each file's suffix a..e is, in this order, first,
# bit-exact, bill, unnamed, defaults)
# first: the bill on HF models (every step sampled), results with and
#   without the probe, torch.compile, DDP, an OOM with --snapshot.
# bit-exact: what holds the bytes the categories do not name
#   (bench/gpu/jobs/probe_unexplained.py), results bit-exact with and
#   without the probe, step-time overhead, interleaved runs.
# bill: the bill of twelve configurations, an OOM with --snapshot, and the
#   overhead, with the report and doctor of each run.
# unnamed: the blocks the probe leaves unnamed (bench/gpu/jobs/probe_unnamed.py)
#   and the overhead again.
# defaults: the bill with PyTorch's defaults (no deterministic algorithms).
# Writes $OUT/jobs-NAME.jsonl (the jobs' own figures, one line per run, with
# the run's directory) and $OUT/records-NAME.tar.gz (every run record).
# Needs build-rel/ (carry).
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
  line=$($vl run --quiet $flags --out "$d" -- python3 bench/gpu/jobs/probe_job.py "$@" 2>>"$o/errors-$what.txt")
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
    python3 bench/gpu/jobs/probe_unnamed.py $m >> "$o/unnamed-$what.jsonl" 2>>"$o/errors-$what.txt"
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
  python3 bench/gpu/jobs/probe_unexplained.py > "$o/unexplained.json" 2>>"$o/errors-$what.txt"
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
