#!/bin/bash
# Does the allocator model replay the caching allocator's own history of a run to the byte, and what is live at its peak?
#   bench/gpu/run.sh histories NAME...
# NAME: a run of measure.py's suites or of bench/configs/unseen*.jsonl.
# Each is measured by bench/gpu/jobs/alloc_history.py with PyTorch's
# allocation history on (one process each; the names alternate over GPUs 0
# and 1 when two are visible); its large events and the Python lines that
# made them summarised by bench/gpu/jobs/job_common.py summary() (large.json); the
# history converted to a trace (python3 -m vramledger.history) and replayed
# by `vramledger trace --replay`. Writes $OUT/histories.tar.xz (every run's
# directory, without the pickles) and $OUT/history-GPU.txt. Histories so
# far: bench/results/generate-reserve/, nccl-run/, unseen-sets/,
# replay-histories/. Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
[ $# -gt 0 ] || { echo "usage: bench/gpu/run.sh histories NAME..." >&2; exit 2; }
mkdir -p "$o"
record_env "$o/env-histories.txt"
export PYTHONPATH=$PWD/python
h=/tmp/histories
rm -rf $h; mkdir -p $h
ngpu=$(nvidia-smi -L | wc -l)
hist() { # GPU NAME...
  g=$1; shift
  for n in "$@"; do
    CUDA_VISIBLE_DEVICES=$g python3 bench/gpu/jobs/alloc_history.py $h $n >> "$o/history-$g.txt" 2>>"$o/errors-histories.txt"
    d=$h/$n
    python3 -c "import pickle, json, sys; sys.path.insert(0, 'bench/gpu/jobs'); from job_common import summary; json.dump(summary(pickle.load(open('$d/hist.pickle', 'rb'))), open('$d/large.json', 'w'), indent=1)" 2>>"$o/errors-histories.txt"
    python3 -m vramledger.history $d/hist.pickle > $d/hist.trace 2> $d/hist.info &&
      $vl trace --replay $d/hist.trace --format json > $d/hist-replay.json 2>>"$o/errors-histories.txt"
    xz -T4 $d/hist.trace; rm -f $d/hist.pickle
  done
}
if [ "$ngpu" -ge 2 ]; then
  a= b= i=0
  for n in "$@"; do if [ $((i % 2)) = 0 ]; then a="$a $n"; else b="$b $n"; fi; i=$((i + 1)); done
  # shellcheck disable=SC2086
  { hist 0 $a & hist 1 $b & wait; }
else
  hist 0 "$@"
fi
tar -C $h -cJf "$o/histories.tar.xz" . 2>>"$o/errors-histories.txt"
ls -la "$o"
