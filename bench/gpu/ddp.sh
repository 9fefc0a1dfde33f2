#!/bin/bash
# DDP, FSDP and ZeRO-1 ranks (bench/results/ddp-rebuild/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_ddp).
#
# suite ddp: How much does each rank hold under DDP and FSDP on 1 and 2 GPUs, and under `vramledger run`?
#   bench/gpu/run.sh ddp
# (bench/results/ddp-rebuild/README.md#ddp) On two H200s: GPT-2 under DDP, FSDP full shard
# and FSDP shard-grad-op on 1 and 2 GPUs (every rank's peak, step time), one
# DDP run under `vramledger run` (its record, report and doctor). Runs
# bench/gpu/run.sh trace-meta beside it (CPU only). Needs build-rel/ (carry).
#
# suite ddp-rebuild: Does DDP's second step hold its first gradient buckets, and how close is the estimate on DDP, ZeRO-1 and pipeline jobs (2 GPUs)?
#   bench/gpu/run.sh ddp-rebuild NAME, NAME one of (bench/results/ddp-rebuild/partN-NAME/ but for
#   the last three):
# trials (two GPUs): DDP's bucket rebuild, trial by trial
#   (bench/gpu/jobs/parallel_jobs.py rebuild-trials): GPT-2 with a synchronizing loop and
#   0/20/50/100 ms after each step, a loop that only copies its batch from
#   the host, and an asynchronous one; the same with
#   TORCH_NCCL_AVOID_RECORD_STREAMS=0; Qwen2-0.5B; then whole jobs
#   (bench/gpu/jobs/parallel_jobs.py data) with an asynchronous loop, for the estimate.
# vl-run (two GPUs): GPT-2 DDP under `vramledger run` (doctor VL-D015 on
#   real records) and whole jobs with 0.1 s once after the first step.
# under-run (two GPUs): pipeline stages and FSDP under `vramledger run`
#   (every rank's bill side by side in report), and the cost of `run` on a
#   DDP step: GPT-2, 40 steps, 4 runs with and 4 without, alternating.
# pp-histories (two GPUs): GPipe's stages over-estimated (+5 to +9 %):
#   every rank's live set at its peak, GPT-2 GPipe and 1F1B, 4 micro-batches.
# pp-unseen (two GPUs): four pipeline runs the GPipe correction did not
#   see (pp-predictions.txt written before), to judge it.
# zero1 (two GPUs): PyTorch's ZeRO-1 (DDP + ZeroRedundancyOptimizer),
#   GPT-2 and Qwen2-0.5B, three runs each (zero1-predictions.txt written before).
# replay-unseen (two GPUs): four DDP/ZeRO-1 jobs the DDP replay did not see
#   (ddp-replay-predictions.txt written before), to judge it.
# static-graph: GPT-2 DDP's two peaks, four runs each as it is, with
#   static_graph=True (DDP never rebuilds its buckets) and with
#   gradient_as_bucket_view=True (bench/results/unseen-sets/raw.jsonl:ddp-two-peaks/).
# pause: GPT-2 DDP alternately without and with 0.3 s after each step
#   (bench/results/replay-histories/raw.jsonl:ddp-pause/).
# record-streams: GPT-2 DDP's two peaks, four runs as they are and four
#   with TORCH_NCCL_AVOID_RECORD_STREAMS=1 (bench/results/nccl-run/raw.jsonl:ddp-record-stream/).
# Needs build-rel/ (carry). Results under $OUT.

suite_ddp() {
set -u
. bench/gpu/env.sh
( VL_SUITE=trace-meta bash bench/gpu/trace.sh > $o/meta-log.txt 2>&1 ) &
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } > $o/multi-env.txt
for mode in ddp fsdp-full fsdp-grad-op; do
  for n in 1 2; do
    torchrun --standalone --nproc-per-node $n bench/gpu/jobs/parallel_jobs.py data --mode $mode 2>>$o/multi-err.txt \
        | grep '^{' >> $o/multi.jsonl
  done
done
$vl run --quiet --out /tmp/ddp-run -- torchrun --standalone --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp \
    2>>$o/multi-err.txt | grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-under-vl-run"/' >> $o/multi.jsonl
$vl report /tmp/ddp-run --format json > $o/ddp-report.json 2>>$o/multi-err.txt
$vl doctor /tmp/ddp-run --format json > $o/ddp-doctor.json 2>>$o/multi-err.txt
wait
tail -c 20000 $o/multi-err.txt > $o/multi-err-tail.txt; rm -f $o/multi-err.txt
ls -la $o
}

suite_ddp_rebuild() {
set -u
. bench/gpu/env.sh
what=${1:?usage: bench/gpu/run.sh ddp-rebuild trials|vl-run|under-run|pp-histories|pp-unseen|zero1|replay-unseen|static-graph|pause|record-streams}
case $what in
  trials|vl-run|under-run|pp-histories|pp-unseen|zero1|replay-unseen|static-graph|pause|record-streams) ;;
  *) echo "bench/gpu/run.sh ddp-rebuild: no run '$what' (trials|vl-run|under-run|pp-histories|pp-unseen|zero1|replay-unseen|static-graph|pause|record-streams)" >&2; exit 2 ;;
esac
mkdir -p "$o"
record_env "$o/env-$what.txt"
tr="torchrun --standalone --nproc-per-node 2"
if [ "$what" = trials ]; then
  t0=$(date +%s)
  timeout 240 $tr bench/gpu/jobs/parallel_jobs.py rebuild-trials --trials ${TRIALS:-16} \
      --loops sync:0,sync:0.02,sync:0.05,sync:0.1,host:0,async:0 \
      2>>"$o/errors-trials.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "gpt2 trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  TORCH_NCCL_AVOID_RECORD_STREAMS=0 timeout 90 $tr bench/gpu/jobs/parallel_jobs.py rebuild-trials \
      --trials ${TRIALS2:-10} --loops sync:0,async:0 --tag TORCH_NCCL_AVOID_RECORD_STREAMS=0 \
      2>>"$o/errors-trials.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "env trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  timeout 120 $tr bench/gpu/jobs/parallel_jobs.py rebuild-trials --config data/models/qwen2-0.5b.json \
      --trials ${TRIALS3:-6} --loops sync:0,host:0,async:0 \
      2>>"$o/errors-trials.txt" | grep '^{' >> "$o/trials.jsonl"
  echo "qwen trials $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  for i in 1 2 3; do
    timeout 60 $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --async-loop 2>>"$o/errors-trials.txt" |
        grep '^{' >> "$o/jobs.jsonl"
    timeout 60 $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --async-loop --config data/models/qwen2-0.5b.json \
        2>>"$o/errors-trials.txt" | grep '^{' >> "$o/jobs.jsonl"
  done
  echo "jobs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors-trials.txt" > "$o/errors-trials-tail.txt"; rm -f "$o/errors-trials.txt"
fi
if [ "$what" = vl-run ]; then
  # GPT-2 DDP under `vramledger run` (every rank's probe; doctor's
  # VL-D015 on real records), then whole jobs with 0.1 s once after the
  # first step (the finding's fix)
  t0=$(date +%s)
  for i in 1 2 3 4; do
    rm -rf /tmp/ddp-run$i
    timeout 90 $vl run --quiet --out /tmp/ddp-run$i -- $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --steps 6 \
        2>>"$o/errors-vl-run.txt" | grep '^{' >> "$o/ddp-vl-run.jsonl"
    $vl doctor /tmp/ddp-run$i --format json > /tmp/ddp-run$i/doctor.json 2>>"$o/errors-vl-run.txt"
    $vl report /tmp/ddp-run$i --format json > /tmp/ddp-run$i/report.json 2>>"$o/errors-vl-run.txt"
  done
  echo "vl runs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tar cJf "$o/ddp-runs.tar.xz" -C /tmp ddp-run1 ddp-run2 ddp-run3 ddp-run4
  for i in 1 2 3 4; do
    timeout 60 $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --pause-first 0.1 2>>"$o/errors-vl-run.txt" |
        grep '^{' >> "$o/jobs-pause-first.jsonl"
  done
  echo "pause-first jobs $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors-vl-run.txt" > "$o/errors-vl-run-tail.txt"; rm -f "$o/errors-vl-run.txt"
fi
if [ "$what" = under-run ]; then
  t0=$(date +%s)
  for job in "pp bench/gpu/jobs/parallel_jobs.py pipeline --steps 6" "fsdp bench/gpu/jobs/parallel_jobs.py data --mode fsdp-full --steps 6" \
             "zero2 bench/gpu/jobs/parallel_jobs.py data --mode fsdp-grad-op --steps 6"; do
    set -- $job; name=$1; shift
    rm -rf /tmp/run-$name
    timeout 120 $vl run --quiet --out /tmp/run-$name -- $tr "$@" 2>>"$o/errors-under-run.txt" |
        grep '^{' | sed "s/^{/{\"under\": \"vl run $name\", /" >> "$o/under-run.jsonl"
    $vl report /tmp/run-$name > /tmp/run-$name/report.txt 2>>"$o/errors-under-run.txt"
    $vl report /tmp/run-$name --format json > /tmp/run-$name/report.json 2>>"$o/errors-under-run.txt"
    $vl doctor /tmp/run-$name --format json > /tmp/run-$name/doctor.json 2>>"$o/errors-under-run.txt"
  done
  tar cJf "$o/runs.tar.xz" -C /tmp run-pp run-fsdp run-zero2
  echo "under run $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  for i in 1 2 3 4; do
    timeout 90 $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --steps 40 2>>"$o/errors-under-run.txt" |
        grep '^{' | sed 's/^{/{"under": "bare", /' >> "$o/overhead.jsonl"
    rm -rf /tmp/ovh
    timeout 90 $vl run --quiet --out /tmp/ovh -- $tr bench/gpu/jobs/parallel_jobs.py data --mode ddp --steps 40 \
        2>>"$o/errors-under-run.txt" | grep '^{' | sed 's/^{/{"under": "vl run", /' >> "$o/overhead.jsonl"
  done
  echo "overhead $(( $(date +%s) - t0 )) s" >> "$o/times.txt"
  tail -c 20000 "$o/errors-under-run.txt" > "$o/errors-under-run-tail.txt"; rm -f "$o/errors-under-run.txt"
fi
if [ "$what" = pp-histories ]; then
  mkdir -p /tmp/pph
  for sch in gpipe 1f1b; do
    timeout 120 $tr bench/gpu/jobs/parallel_jobs.py pipeline --schedule $sch --steps 4 --history /tmp/pph/pp-$sch.json \
        2>>"$o/errors-pp-histories.txt" | grep '^{' >> "$o/pp-hist.jsonl"
  done
  tar cJf "$o/pp-histories.tar.xz" -C /tmp pph
  tail -c 20000 "$o/errors-pp-histories.txt" > "$o/errors-pp-histories-tail.txt"; rm -f "$o/errors-pp-histories.txt"
fi
if [ "$what" = pp-unseen ]; then
  while read -r m sch b mic seq; do
    timeout 120 $tr bench/gpu/jobs/parallel_jobs.py pipeline --model "$m" --schedule "$sch" --batch "$b" --micro "$mic" \
        --seq "$seq" --steps 4 2>>"$o/errors-pp-unseen.txt" | grep '^{' >> "$o/pp5.jsonl"
  done <<'RUNS'
gpt2-medium gpipe 8 4 512
gpt2 gpipe 16 8 256
gpt2 1f1b 16 8 256
gpt2-medium 1f1b 8 4 1024
RUNS
  tail -c 20000 "$o/errors-pp-unseen.txt" > "$o/errors-pp-unseen-tail.txt"; rm -f "$o/errors-pp-unseen.txt"
fi
if [ "$what" = zero1 ]; then
  for i in 1 2 3; do
    timeout 90 $tr bench/gpu/jobs/parallel_jobs.py data --mode zero1 2>>"$o/errors-zero1.txt" | grep '^{' >> "$o/zero1.jsonl"
    timeout 90 $tr bench/gpu/jobs/parallel_jobs.py data --mode zero1 --config data/models/qwen2-0.5b.json \
        2>>"$o/errors-zero1.txt" | grep '^{' >> "$o/zero1.jsonl"
  done
  tail -c 20000 "$o/errors-zero1.txt" > "$o/errors-zero1-tail.txt"; rm -f "$o/errors-zero1.txt"
fi
if [ "$what" = replay-unseen ]; then
  while read -r mode m b s rest; do
    # shellcheck disable=SC2086
    timeout 100 $tr bench/gpu/jobs/parallel_jobs.py data --mode "$mode" $rest --batch "$b" --seq "$s" \
        2>>"$o/errors-replay-unseen.txt" | grep '^{' >> "$o/ddp-replay-unseen.jsonl"
  done <<'RUNS'
ddp gpt2-medium 4 1024 --model gpt2-medium
ddp tinyllama-1.1b 2 1024 --config bench/configs/tinyllama-1.1b.json
zero1 qwen2-0.5b 8 512 --config data/models/qwen2-0.5b.json
zero1 gpt2 8 1024 --model gpt2
RUNS
  tail -c 20000 "$o/errors-replay-unseen.txt" > "$o/errors-replay-unseen-tail.txt"; rm -f "$o/errors-replay-unseen.txt"
fi
if [ "$what" = static-graph ]; then
  for i in 1 2 3 4; do
    for m in ddp ddp-static ddp-bucket-view; do
      torchrun --standalone --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode $m 2>>"$o/errors-static-graph.txt" |
          grep '^{' >> "$o/ddp-static.jsonl"
    done
  done
  tail -c 8000 "$o/errors-static-graph.txt" > "$o/errors-static-graph-tail.txt"; rm -f "$o/errors-static-graph.txt"
fi
if [ "$what" = pause ]; then
  # does a gap between steps (a data loader's) settle
  # GPT-2 DDP's two peaks? Alternating runs without and with 0.3 s after
  # each step (NCCL's watchdog polls its work every 100 ms and lets go of
  # the tensors it keeps for the allocator's safety when it sees them done)
  for i in 1 2 3 4; do
    for p in 0 0.3; do
      torchrun --standalone --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp --pause $p 2>>"$o/errors-pause.txt" |
          grep '^{' >> "$o/ddp-pause.jsonl"
    done
  done
  tail -c 4000 "$o/errors-pause.txt" > "$o/errors-pause-tail.txt"; rm -f "$o/errors-pause.txt"
fi
if [ "$what" = record-streams ]; then
  # GPT-2 DDP's two peaks (DDP's first buckets freed at the
  # rebuild or only in the second backward): four runs as they are and four
  # with NCCL's record_stream off (TORCH_NCCL_AVOID_RECORD_STREAMS=1)
  for i in 1 2 3 4; do
    $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp 2>>"$o/errors-record-streams.txt" |
        grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-default"/' >> "$o/ddp-record-streams.jsonl"
    TORCH_NCCL_AVOID_RECORD_STREAMS=1 $tr --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp \
        2>>"$o/errors-record-streams.txt" | grep '^{' | sed 's/"mode": "ddp"/"mode": "ddp-avoid-record-streams"/' >> "$o/ddp-record-streams.jsonl"
  done
  tail -c 8000 "$o/errors-record-streams.txt" > "$o/errors-record-streams-tail.txt"; rm -f "$o/errors-record-streams.txt"
fi
}

suite=${VL_SUITE:-ddp}
"suite_${suite//-/_}" "$@"
