#!/bin/sh
# Device runs of 2026-11-29. PART=1: the
# sampler's steady cost at 100 Hz, the loop alone, with its NVML reads
# counted, and the caching allocator's own history of the
# calibration runs whose reservation the estimator misses most: every
# generate() run and the fragmenting training runs; each history replayed
# through vramledger's allocator model). Needs build-rel/ (carry). Results
# under $OUT, in few files (the device returns at most 8).
set -u
. bench/device_env.sh
mkdir -p "$o"
record_env "$o/env-$PART.txt"
if [ "$PART" = 1 ]; then
  rm -rf /tmp/sc-* /tmp/hist
  SC_INTERVALS=10 SC_REPS="1 2 3" sh bench/sampler_cost.sh > "$o/sampler_cost.jsonl" 2>>"$o/errors-1.txt"
  python3 bench/alloc_history.py /tmp/hist llama7b-infer qwen05-infer gpt2-infer-fp32 \
    mistral7b-infer-long phi3-infer-eager gemma2b-infer pythia14-amp-adamw-sdpa \
    gemma2b-amp-adamw-ckpt phi3-mixed-adamw-fused gpt2l-amp-adamw-ckpt phi3-amp-sgd-ckpt \
    pythia160-ampfp16-adamw pythia14-amp-adamw-fused-ckpt > "$o/history.txt" 2>>"$o/errors-1.txt"
  for d in /tmp/hist/*/; do
    python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
      $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-1.txt"
    xz -T4 $d/hist.trace
  done
  tar -C /tmp/hist -cJf "$o/hist.tar.xz" --exclude hist.pickle . 2>>"$o/errors-1.txt"
  tar -C /tmp/hist -cf "$o/pickles.tar" $(cd /tmp/hist && ls -d */hist.pickle | grep infer) 2>>"$o/errors-1.txt"
  xz -T8 "$o/pickles.tar"
  ls -la "$o" >> "$o/history.txt"
fi
if [ "$PART" = 2 ]; then
  export PYTHONPATH=$PWD/python
  rm -rf /tmp/sc-* /tmp/hist2
  # issue 4 again, with NVML read at most every 20 ms before the first allocation
  SC_INTERVALS=10 SC_REPS="1 2 3" sh bench/sampler_cost.sh > "$o/sampler_cost2.jsonl" 2>>"$o/errors-2.txt"
  # issue 7: the replay's speed on this machine's CPU
  for i in 1 2 3; do build-rel/caching_bench 20000000 >> "$o/caching_bench.txt" 2>&1; done
  # issue 3: every generate() run in a process of its own (no blocks of
  # earlier runs pinning segments), with its history replayed
  for n in llama7b-infer qwen05-infer gpt2-infer-fp32 mistral7b-infer-long phi3-infer-eager gemma2b-infer; do
    python3 bench/alloc_history.py /tmp/hist2 $n >> "$o/history2.txt" 2>>"$o/errors-2.txt"
    d=/tmp/hist2/$n
    python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
      $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-2.txt"
    xz -T4 $d/hist.trace; rm -f $d/hist.pickle
  done
  tar -C /tmp/hist2 -cJf "$o/hist2.tar.xz" . 2>>"$o/errors-2.txt"
fi
if [ "$PART" = 3 ]; then
  # issue 7: meta dry runs with values for small tensors and SDPA through
  # CUDA's kernels' meta functions (bench/trace_meta.sh); the replay's
  # speed with free blocks by size class; issue 4: three more repeats
  o=$o bash bench/trace_meta.sh > "$o/meta-ls.txt" 2>>"$o/errors-3.txt"
  for i in 1 2 3; do build-rel/caching_bench 20000000 >> "$o/caching_bench3.txt" 2>&1; done
  rm -rf /tmp/sc-*
  SC_INTERVALS=10 SC_REPS="4 5 6" sh bench/sampler_cost.sh > "$o/sampler_cost3.jsonl" 2>>"$o/errors-3.txt"
fi
if [ "$PART" = 4 ]; then
  # issue 4: NVML read when the driver-allocated bytes pass their highest
  # (not on any movement); the 50 ms spike must still be caught
  rm -rf /tmp/sc-* /tmp/spike
  SC_INTERVALS=10 SC_REPS="${SC_REPS:-1 2 3}" sh bench/sampler_cost.sh > "$o/sampler_cost4.jsonl" 2>>"$o/errors-4.txt"
  $vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/spike.py
  $vl report /tmp/spike --format json > "$o/spike_report.json" 2>>"$o/errors-4.txt"
fi
