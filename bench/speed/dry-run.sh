#!/bin/sh
# How long does a meta dry run of a 7B model take on this machine?
# bench/speed/dry_run_job.py (Llama-2-7B's shape in plain PyTorch, bf16, AdamW,
# 2 steps, batch 1 x 2048) under `vramledger trace` on meta tensors; prints
# the wall time, the peak memory of the whole dry run (RSS) and the replay.
# Usage: bench/speed/dry-run.sh [VRAMLEDGER] [PYTHON]
set -eu
vl=${1:-build-release/vramledger}
py=${2:-python3}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
/usr/bin/time -f "wall %e s, max RSS %M KiB" "$vl" trace --out "$d/run" --gpu h200 --format json -- \
  "$py" "$(dirname "$0")/dry_run_job.py" > "$d/out.json" 2> "$d/err"
tail -1 "$d/err"
"$py" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['replays'][0]; print('events', d['events'], 'complete', d['complete'], 'peak allocated %.2f GiB, reserved %.2f GiB' % (r['peak_allocated_bytes']/2**30, r['peak_reserved_bytes']/2**30))" "$d/out.json"
