#!/bin/sh
# Speed of `vramledger estimate`, process start to exit (the target: one estimate
# under 20 ms, --max-batch under 100 ms). Uses hyperfine (Debian package).
# Writes a Markdown summary to the file given (default: stdout).
set -eu
command -v hyperfine >/dev/null || { echo "bench/speed/estimate.sh needs hyperfine: apt-get install hyperfine" >&2; exit 2; }
cd "$(dirname "$0")/../.."
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
