#!/bin/sh
# The HTML reports open in headless Chromium (Debian's chromium): the page
# renders, its SVG charts are in the DOM, no console error; a screenshot of
# each is kept in ARTIFACTS. usage: html_chromium.sh VRAMLEDGER DATA_DIR ARTIFACTS
set -u
bin=$1
data=$2
art=$3
mkdir -p "$art"
command -v chromium >/dev/null || { echo "chromium is not installed (scripts/deps.sh installs it)"; exit 1; }
fail=0
page() { # NAME ARGS...
  name=$1
  shift
  "$bin" "$@" --format html > "$art/$name.html" || { echo "FAIL $name: vramledger $*"; fail=1; return; }
  url="file://$(cd "$art" && pwd)/$name.html"
  flags="--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,2200"
  # shellcheck disable=SC2086
  timeout 60 chromium $flags --enable-logging=stderr --v=0 --screenshot="$art/$name.png" "$url" \
    >/dev/null 2>"$art/$name.log"
  # shellcheck disable=SC2086
  timeout 60 chromium $flags --dump-dom "$url" 2>/dev/null > "$art/$name.dom"
  svgs=$(grep -o "<svg" "$art/$name.dom" | wc -l)
  if [ ! -s "$art/$name.png" ]; then
    echo "FAIL $name: no screenshot"; fail=1
  elif [ "$svgs" -lt "$want" ]; then
    echo "FAIL $name: $svgs SVG charts in the DOM, want $want"; fail=1
  elif grep -E "CONSOLE|Uncaught" "$art/$name.log" | grep -v "dbus" | grep -q .; then
    echo "FAIL $name: console errors"; grep -E "CONSOLE|Uncaught" "$art/$name.log"; fail=1
  else
    echo "ok   $name: $svgs SVG charts, screenshot $art/$name.png"
  fi
}
want=3 page report-h200-probe report "$data/records/h200-gpt2-probe.jsonl" --estimate --model gpt2 \
  --batch 8 --seq 512 --precision amp-bf16 --optimizer adamw
want=3 page report-synthetic report "$data/records/probe-synthetic.jsonl"
want=1 page report-no-probe report "$data/records/sample.jsonl"
# two pipeline stages: the run's chart, the bill, each rank's bill, the timeline
want=4 page report-pp-stages report "$data/records/h200x2-gpt2-pp-1f1b.jsonl"
exit $fail
