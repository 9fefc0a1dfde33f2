#!/bin/sh
# The screenshots of this folder: each page at 1400 and 760 pixels wide in
# headless Chromium (a 6000-pixel window), cut 24 pixels under the page's
# last non-white row, 256 colours (crop.py); the 760-pixel ones are committed
# to git only (bench/ARCHIVE.md). Run from the repository's root, so the
# pages name their records by relative paths.
# usage: sh bench/results/report-pages/take.sh BUILD/vramledger
set -eu
bin=$1
out=bench/results/report-pages
tmp=$(mktemp -d)
shot() { # NAME ARGS...: the page, at both widths
  name=$1
  shift
  "$bin" "$@" --format html >"$tmp/$name.html"
  for w in 1400 760; do
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000 \
      --window-size="$w,6000" --screenshot="$tmp/$name-$w.png" "file://$tmp/$name.html" \
      >/dev/null 2>&1
    python3 "$out/crop.py" "$tmp/$name-$w.png" "$out/$name-$w.png"
  done
}
shot report-h200-probe report tests/data/records/h200-gpt2-probe.jsonl --estimate --model gpt2 \
  --batch 8 --seq 512 --precision amp-bf16 --optimizer adamw
shot report-pp-stages report tests/data/records/h200x2-gpt2-pp-1f1b.jsonl
shot report-ddp report tests/data/records/h200x2-gpt2-ddp-kept-rank1.jsonl
shot report-no-probe report tests/data/records/sample.jsonl
shot report-cpu-attach report tests/data/records/cpu-attach.jsonl
shot plan plan --model llama-3-8b --precision bf16 --lora-rank 16 --tokens 200000000 --seq 2048 \
  --global-batch 64 --max-gpus 4 --gpus h100-80gb,l40s --top 5
rm -r "$tmp"
