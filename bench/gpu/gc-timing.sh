#!/bin/bash
# Does the timing of Python's garbage collector move a job's peak reserved?
#   bench/gpu/run.sh gc-timing [NAME...]   (default: deberta3-amp-adamw-eager)
# Each entry of measure.py's suites runs three times on the GPU: as the
# suites measure it, with the cyclic collector off (gc.disable()), and
# collecting often (gc.set_threshold(50)); one measure.py record each,
# $OUT/NAME.{default,off,often}.json. A job whose tensors die in reference
# cycles frees them when the collector runs: a tracer that allocates
# Python objects runs it at other moments.
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
