#!/bin/sh
# The HTML pages open in headless Chromium (Debian's chromium) and measure
# themselves: each chart's script (lib/render/html_charts.js) writes into
# the hidden block "vl-check" one line a chart, "ok" or "bad" with why: a
# legend box over the plotted area, a tick or axis label outside its chart,
# clipped, broken over lines, on its neighbour or in e-notation, a plotted
# maximum more than a pixel from the record's peak, a series above the
# NVML curve it belongs under at a sample, a first view other than the
# training steps, a ladder whose parts do not add up, a plan whose hover
# does not name it. A page passes when
# every chart says ok and nothing reached the console. Two generated
# records check the thinning: an hour of samples with a one-sample spike,
# and 5,000 probed steps with one step's peak. Each page, its DOM and, for a
# page that fails, its screenshot are kept in ARTIFACTS. usage: html_chromium.sh VRAMLEDGER DATA_DIR ARTIFACTS
# VL_HTML_NO_BROWSER=1 (the sanitizer build's ctest): every page rendered
# by this build, the records' markup checked in the HTML, no browser: its
# measures do not depend on how the program was compiled
set -u
bin=$1
data=$2
art=$3
nobrowser=${VL_HTML_NO_BROWSER:-}
mkdir -p "$art"
[ -n "$nobrowser" ] || command -v chromium >/dev/null ||
  { echo "chromium is not installed (scripts/deps.sh installs it)"; exit 1; }
fail=0
flags="--headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000"
page() { # NAME WIDTH HEIGHT ARGS...: render, measure (a failed page: its screenshot)
  name=$1 w=$2 h=$3
  shift 3
  "$bin" "$@" --format html >"$art/$name.html" || { echo "FAIL $name: vramledger $*"; fail=1; return; }
  if [ -n "$nobrowser" ]; then
    grep -q '</html>' "$art/$name.html" || { echo "FAIL $name: no </html>"; fail=1; }
    echo "ok   $name: rendered"
    return
  fi
  url="file://$(cd "$art" && pwd)/$name.html"
  # shellcheck disable=SC2086
  timeout 60 chromium $flags --window-size="$w,$h" --enable-logging=stderr --v=0 \
    --dump-dom "$url" 2>"$art/$name.log" >"$art/$name.dom"
  charts=$(grep -c '<figure class="vl-chart" data-name=' "$art/$name.html")
  sed -n '/<pre id="vl-check"/,/<\/pre>/p' "$art/$name.dom" | sed 's/<[^>]*>//g' | grep . >"$art/$name.check"
  ok=$(grep -c '^ok ' "$art/$name.check")
  if [ ! -s "$art/$name.dom" ]; then
    echo "FAIL $name: Chromium gave no page (its log: $art/$name.log)"; fail=1
  elif grep -q '^bad' "$art/$name.check"; then
    echo "FAIL $name:"; grep '^bad' "$art/$name.check"; fail=1
  elif [ "$ok" != "$charts" ]; then
    echo "FAIL $name: $ok of $charts charts measured"; cat "$art/$name.check"; fail=1
  elif grep -E "CONSOLE|Uncaught" "$art/$name.log" | grep -v "dbus" | grep -q .; then
    echo "FAIL $name: console errors"; grep -E "CONSOLE|Uncaught" "$art/$name.log"; fail=1
  else
    echo "ok   $name: $charts charts"
    sed 's/^/       /' "$art/$name.check"
    return
  fi
  # a failed page's screenshot, to see what the measures saw
  # shellcheck disable=SC2086
  timeout 60 chromium $flags --window-size="$w,$h" --screenshot="$art/$name.png" "$url" \
    >/dev/null 2>&1 && echo "       screenshot $art/$name.png"
}
want_charts() { # NAME N: the page has N charts
  n=$(grep -c '<figure class="vl-chart" data-name=' "$art/$1.html" 2>/dev/null)
  [ "$n" = "$2" ] || { echo "FAIL $1: $n charts, want $2"; fail=1; }
}
# an hour at 100 ms (36,000 samples): 4 GiB, one sample of 20 GiB
awk 'BEGIN {
  t = 1000000000000; g = 1073741824
  printf "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":%.0f,\"start_unix_ms\":1764400000000,", t
  printf "\"command\":[\"python\",\"spike.py\"],\"host\":\"node-a\",\"interval_ms\":100,\"nvml\":\"ok\","
  printf "\"driver\":\"580.159.04\",\"gpus\":[{\"index\":0,\"name\":\"NVIDIA H200\",\"uuid\":\"GPU-aaaa\","
  printf "\"total_bytes\":150109880320}],\"vramledger\":\"0.1.0\"}\n"
  for (i = 0; i < 36000; i++) {
    b = (i == 23456 ? 20 : 4) * g + (i % 7) * 1048576
    printf "{\"type\":\"sample\",\"t_ns\":%.0f,\"gpus\":[],\"procs\":[],\"tree_bytes\":%.0f,", t + i * 100000000, b
    printf "\"tree_procs\":1,\"other_bytes\":0,\"cuda_alloc_bytes\":%.0f}\n", b - g / 2
  }
  printf "{\"type\":\"exit\",\"t_ns\":%.0f,\"status\":0,\"wall_ns\":3600000000000}\n", t + 36000 * 100000000
}' >"$art/spike-hour.jsonl"
page report-spike-hour 1100 900 report "$art/spike-hour.jsonl"
want_charts report-spike-hour 1
# the probe in every one of 5,000 steps (25,000 phases: past the bands'
# cap), one step's backward at 30 GiB
awk 'BEGIN {
  g = 1073741824; t = 2000
  print "{\"type\":\"meta\",\"schema\":\"vramledger.run/1\",\"t_ns\":1000,\"start_unix_ms\":0,\"command\":[\"python3\",\"train.py\"],\"host\":\"test\",\"interval_ms\":100,\"nvml\":\"ok\",\"driver\":\"\",\"gpus\":[]}"
  print "{\"type\":\"probe\",\"t_ns\":2000,\"pid\":10,\"version\":1,\"torch\":\"2.11.0\",\"python\":\"3.12\",\"cuda\":true,\"rank\":0,\"local_rank\":0,\"world_size\":1,\"sample_every\":1}"
  split("forward loss backward pre_step optimizer", ph, " ")
  for (s = 1; s <= 5000; s++) {
    for (k = 1; k <= 5; k++) {
      t0 = t; t += 10000000
      pk = (s == 3210 && k == 3) ? 30 * g : (2 + k / 2) * g
      printf "{\"type\":\"phase\",\"t_ns\":%.0f,\"pid\":10,\"rank\":0,\"step\":%d,\"phase\":\"%s\",\"t0_ns\":%.0f,", t, s, ph[k], t0
      printf "\"device\":0,\"allocated\":%.0f,\"reserved\":%.0f,\"active\":%.0f,\"inactive_split\":0,", 2 * g, 6 * g, 2 * g
      printf "\"peak_allocated\":%.0f,\"peak_reserved\":%.0f,\"alloc_retries\":0,\"ooms\":0}\n", pk, (pk > 6 * g ? pk : 6 * g)
    }
    pk = s == 3210 ? 30 * g : 4.5 * g
    printf "{\"type\":\"step\",\"t_ns\":%.0f,\"pid\":10,\"rank\":0,\"step\":%d,\"time_ns\":50000000,\"tokens\":4096,", t, s
    printf "\"samples\":8,\"micro_batches\":1,\"sampled\":true,\"probe_ns\":600000,\"peak_allocated\":%.0f,", pk
    printf "\"peak_reserved\":%.0f,\"peak_phase\":\"backward\",\"modules\":[],\"allocated\":%.0f,\"reserved\":%.0f}\n", (pk > 6 * g ? pk : 6 * g), 2 * g, 6 * g
  }
  printf "{\"type\":\"exit\",\"t_ns\":%.0f,\"status\":0,\"wall_ns\":%.0f}\n", t + 1000, t
}' >"$art/probe-long.jsonl"
page report-probe-long 1100 900 report "$art/probe-long.jsonl"
want_charts report-probe-long 1
page report-h200-probe 1100 2000 report "$data/records/h200-gpt2-probe.jsonl" --estimate --model gpt2 \
  --batch 8 --seq 512 --precision amp-bf16 --optimizer adamw
want_charts report-h200-probe 2
page report-synthetic 1100 1800 report "$data/records/probe-synthetic.jsonl"
page report-no-probe 1100 900 report "$data/records/sample.jsonl"
# a record's strings as markup (a phase "<base href=//e>" at the peak, a
# module "<img ...>", a command "</script><script>..."): the page's DOM
# holds them as text, never as elements
page report-hostile 1100 1800 report "$data/records/hostile-peak-phase.jsonl"
hostile=$art/report-hostile.dom
[ -z "$nobrowser" ] || hostile=$art/report-hostile.html
for tag in '<base' 'onerror="' '<script>alert'; do
  if grep -q "$tag" "$hostile"; then
    echo "FAIL report-hostile: the DOM has an element from the record: $tag"; fail=1
  fi
done
# two pipeline stages: the run's chart and each rank's bill side by side
page report-pp-stages 1100 2000 report "$data/records/h200x2-gpt2-pp-1f1b.jsonl"
want_charts report-pp-stages 2
# a narrow window: the charts take its width, the labels still inside
page report-narrow 560 1400 report "$data/records/h200x2-gpt2-pp-1f1b.jsonl"

# ---- the page says what the text report says ----
check_has() { # NAME WHAT: the page's check block has a line with WHAT
  [ -z "$nobrowser" ] || return 0
  grep -qF -- "$2" "$art/$1.check" || { echo "FAIL $1: the page's check has no '$2'"; sed 's/^/       /' "$art/$1.check"; fail=1; }
}
dom_has() { # NAME WHAT: the rendered page's text or markup has WHAT
  [ -z "$nobrowser" ] || return 0
  grep -qF -- "$2" "$art/$1.dom" || { echo "FAIL $1: the page lacks '$2'"; fail=1; }
}
dom_lacks() { # NAME WHAT
  [ -z "$nobrowser" ] || return 0
  if grep -qF -- "$2" "$art/$1.dom"; then echo "FAIL $1: the page says '$2'"; fail=1; fi
}
# everything the text report names is on the page: GPU names, finding
# codes, the modules that saved the most, the ladder's layers and gaps,
# fragmentation, DDP's first buckets, each rank, the boundaries
same_as_text() { # NAME RECORD
  "$bin" report "$2" >"$art/$1.txt"
  sed -n 's/^  GPUs: //p' "$art/$1.txt" | tr ',' '\n' | sed 's/^ *[0-9]* //' | grep -v '^none' |
    while IFS= read -r g; do [ -n "$g" ] && dom_has "$1" "$g"; done
  sed -n 's/^  \[\([a-z-]*\)\].*/\1/p' "$art/$1.txt" | while IFS= read -r c; do dom_has "$1" "<b>$c</b>"; done
  sed -n '/modules that saved the most/,/^$/p' "$art/$1.txt" |
    sed -n 's/^    \(.*[^ ]\)  *[0-9.][0-9.]* [KMG]iB$/\1/p' |
    while IFS= read -r m; do dom_has "$1" "<td>$m</td>"; done
  for pair in "the ladder at the peaks|The ladder at the peaks" \
    "CUDA context, kernels, libraries' handles|CUDA context, kernels, libraries' handles" \
    "allocations outside PyTorch's allocator|allocations outside PyTorch's allocator" \
    "cached free blocks|cached free blocks" "(fragmentation)|(fragmentation)" \
    "DDP's first buckets|DDP's first buckets" "every boundary of step|Every boundary of step" \
    "the bill at each rank's peak|The bill at each rank's peak" "growth:|Growth:" \
    "the probe's own time|The probe's own time" "asked of the driver by other|Asked of the driver by other" \
    "not sampled|not sampled" "not measured|not measured"; do
    if grep -qF -- "${pair%%|*}" "$art/$1.txt"; then dom_has "$1" "${pair#*|}"; fi
  done
  grep -o 'rank [0-9]*   pid [0-9]*' "$art/$1.txt" | awk '{print $2}' | while IFS= read -r k; do dom_has "$1" "<td>$k</td>"; done
  # and neither says a zero for what was not measured
  for zero in "0 samples every 0 ms" " 0 tokens/s" "NVML was not available"; do
    dom_lacks "$1" "$zero"
    if grep -qF -- "$zero" "$art/$1.txt"; then echo "FAIL $1: the text report says '$zero'"; fail=1; fi
  done
}
same_as_text report-pp-stages "$data/records/h200x2-gpt2-pp-1f1b.jsonl"
same_as_text report-h200-probe "$data/records/h200-gpt2-probe.jsonl"
same_as_text report-synthetic "$data/records/probe-synthetic.jsonl"
same_as_text report-no-probe "$data/records/sample.jsonl"
page report-ddp 1100 2400 report "$data/records/h200x2-gpt2-ddp-kept-rank1.jsonl"
same_as_text report-ddp "$data/records/h200x2-gpt2-ddp-kept-rank1.jsonl"
dom_has report-ddp "DDP rebuilds its buckets at the second step"
# a CPU job attached by vramledger.attach() outside run: no samples, no
# allocator; the page and the text say so, never a 0
page report-cpu-attach 1100 1400 report "$data/records/cpu-attach.jsonl"
same_as_text report-cpu-attach "$data/records/cpu-attach.jsonl"
want_charts report-cpu-attach 0
dom_has report-cpu-attach "not sampled: the probe was attached by vramledger.attach() outside vramledger run"
dom_has report-cpu-attach "<td>not sampled</td>"
dom_has report-cpu-attach "tokens/s not measured"
dom_has report-cpu-attach 'id="vl-no-timeline"'
dom_lacks report-cpu-attach "0.00 GiB"

# ---- one curve per rank, the rank that peaks highlighted and billed ----
check_has report-pp-stages "ranks 2, highlighted rank 1"
dom_has report-pp-stages '<h3 id="vl-bill-at-peak" data-rank="1">The bill at the peak: rank 1, 1.902 GiB allocated'
check_has report-ddp "ranks 2, highlighted rank"
check_has report-synthetic "ranks 2, highlighted rank 1"

# ---- a timeline that never contradicts itself: at every sample no series
# above the NVML curve it belongs under; the first view is the steps ----
for p in report-pp-stages report-h200-probe report-ddp report-no-probe report-spike-hour; do
  check_has $p "above NVML 0 of"
done
check_has report-h200-probe "zoom steps 9.258-9.863 s of 0.000-11.121 s"
check_has report-pp-stages "zoom steps 25.535-28.236 s of 0.000-30.739 s"
for p in report-pp-stages report-h200-probe report-synthetic report-ddp; do check_has $p "ladder ok: "; done

# ---- the estimate beside the measurement: headers, no -0.000, and what the
# CPU cannot measure said ----
page report-estimate 1100 2400 report "$data/records/probe-synthetic.jsonl" --estimate --model gpt2 \
  --batch 8 --seq 512 --precision amp-bf16
dom_has report-estimate "<th>estimate − measured</th>"
dom_lacks report-estimate "-0.000"
dom_lacks report-estimate "−0.000"
page report-cpu-estimate 1100 1800 report "$data/records/cpu-attach.jsonl" --estimate --model gpt2 \
  --batch 8 --seq 512
dom_has report-cpu-estimate "not measured (no allocator on the CPU)"
dom_has report-cpu-estimate "<tr><td>peak allocated</td><td>not measured (no allocator on the CPU)</td>"
dom_lacks report-cpu-estimate "-0.000"
dom_lacks report-cpu-estimate "−0.000"
page plan 1100 1300 plan --model llama-3-8b --precision bf16 --lora-rank 16 --tokens 200000000 \
  --seq 2048 --global-batch 64 --max-gpus 4 --gpus h100-80gb,l40s --top 5
# a colour a GPU type, a shape a kind of parallelism, the front and the
# chosen plan marked, hovering names the plan, time in its unit
check_has plan "GPU types 2 in 2 colours"
check_has plan 'hover "the chosen plan: '
if [ -z "$nobrowser" ]; then
  grep -q 'shapes [2-5],' "$art/plan.check" || { echo "FAIL plan: fewer than 2 marker shapes"; fail=1; }
  grep -q 'Pareto front [1-9]' "$art/plan.check" || { echo "FAIL plan: no Pareto front"; fail=1; }
  grep -Eq 'time ticks .*[0-9] (min|h|days)' "$art/plan.check" || { echo "FAIL plan: time ticks without a unit"; fail=1; }
fi
page fit 1100 1000 fit --csv "$data/fit/gpt2-eager-h200.csv" --predict batch=16,seq=1024 \
  --model gpt2 --precision amp-bf16 --attention eager --compare allocated
page fit-by-phase 1100 1000 fit --csv "$data/fit/llama-sdpa-h200-phases.csv" --by-phase \
  --predict batch=16,seq=1024
exit $fail
