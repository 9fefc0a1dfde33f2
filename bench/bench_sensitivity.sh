#!/bin/sh
# Speed of `vramledger sensitivity` (issue: 10^5 samples under 1 s with the
# analytic estimator), fallbacks included.
set -eu
cd "$(dirname "$0")/.."
bin=${VL_BIN:-build-rel/vramledger}
q="sensitivity --model llama-3-8b --precision bf16 --lora-rank 16 --batch 4 --seq 2048 --vary seq=±20% --vary hidden=±15% --vary precision=bf16,fp32 --gpus a100-80gb,h100-80gb,h200 --samples 100000"
hyperfine -N --warmup 2 --runs 10 --export-json /tmp/sens_bench.json "$bin $q" >/dev/null 2>&1
python3 - <<'PY'
import json
r = json.load(open("/tmp/sens_bench.json"))["results"][0]
print("| samples | mean s | max s |\n|---:|---:|---:|")
print(f"| 100000 (+ 2 x 20000 for the fallbacks) | {r['mean']:.3f} | {r['max']:.3f} |")
PY
