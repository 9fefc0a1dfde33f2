#!/bin/sh
# The probe's own time on steps it does not sample, on this machine's CPU
# (Debian's torch), for the python/ tree given (default: this checkout's).
# Prints the median probe_ns and step time of the unsampled steps.
#   sh bench/speed/probe-cost.sh [PYTHON_DIR]
set -eu
cd "$(dirname "$0")/../.."
py=${1:-$PWD/python}
d=$(mktemp -d)
PATH=/usr/bin:$PATH VRAMLEDGER_PYTHON_DIR=$py VRAMLEDGER_DATA=$PWD/data \
  build/vramledger run --quiet --no-preload --out "$d/r" -- /usr/bin/python3 bench/speed/probe_cost_job.py
/usr/bin/python3 - "$d/r/record.jsonl" <<'PY'
import json, statistics, sys
st = [json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
xs = [s for s in st if not s["sampled"]]
p = statistics.median(s["probe_ns"] for s in xs) / 1000
t = statistics.median(s["time_ns"] for s in xs) / 1e6
print("%d unsampled steps: probe %.1f us, step %.2f ms, %.2f %%" % (len(xs), p, t, 100 * p / 1000 / t))
PY
rm -rf "$d"
