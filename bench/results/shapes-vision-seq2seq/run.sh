#!/bin/sh
# Formula vs dry run (meta tensors) for the shapes of
# bench/configs/vision-seq2seq.jsonl: encoder-decoders at --target-seq 32,
# 128, 512 over a 512-token source, ResNet-50 and ViT-base at several
# --image-size. One dry run at a time; writes results.csv beside this file.
# usage: bench/results/shapes-vision-seq2seq/run.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/../../.."
bin=${1:-build}/vramledger
VRAMLEDGER_PYTHON=${VRAMLEDGER_PYTHON:-$(scripts/pyenv.sh)}
export VRAMLEDGER_PYTHON
out=bench/results/shapes-vision-seq2seq/results.csv
echo "name,formula_allocated,dry_run_allocated,allocated_pct,formula_reserved,dry_run_reserved,reserved_pct,approximate" >"$out"
python3 - "$bin" <<'PY' >>"$out"
import json, subprocess, sys
bin = sys.argv[1]
for line in open("bench/configs/vision-seq2seq.jsonl"):
    c = json.loads(line)
    args = [bin, "estimate", "--model", c["model"], "--precision", c["precision"],
            "--optimizer", c["optimizer"], "--optimizer-impl", c["optimizer_impl"],
            "--attention", c["attention"], "--checkpointing", c["checkpointing"],
            "--batch", str(c["batch"])]
    if c.get("image_size"):
        args += ["--image-size", str(c["image_size"])]
    else:
        args += ["--seq", str(c["seq"])]
    if c.get("target_seq"):
        args += ["--target-seq", str(c["target_seq"])]
    p = subprocess.run(args + ["--dry-run", "--format", "json"], capture_output=True, text=True)
    if p.returncode != 0:
        print("%s,error,,,,,," % c["name"]); sys.stderr.write(p.stderr); continue
    d = json.loads(p.stdout); r = d["dry_run"]; pct = r["formula_vs_dry_run_pct"]
    print("%s,%d,%d,%+.1f,%d,%d,%+.1f,%s" % (c["name"], d["peak_allocated_bytes"], r["peak_allocated_bytes"],
          pct["peak_allocated"], d["peak_reserved_bytes"], r["peak_reserved_bytes"], pct["peak_reserved"],
          "yes" if d.get("approximate") else "no"))
    sys.stdout.flush()
PY
cat "$out"
