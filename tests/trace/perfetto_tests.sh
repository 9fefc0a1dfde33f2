#!/bin/sh
# `report --format trace` of every shipped run record (tests/data/records/
# and the run records under bench/results/), imported by perfetto_check
# with Perfetto's rules: no slice dropped, every process named, one
# process per rank (a process with the probe's phases or steps).
set -u
vl=$1 check=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/cli/checks.sh" # check NAME CONDITION...

# the checker can fail: reals rounded apart overlap by a nanosecond and
# lose the second slice (what report wrote before its times were integer
# microseconds); a unit in both the name and the argument
printf '%s\n' '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"args":{"name":"p"}},' \
  '{"name":"a","ph":"X","pid":1,"tid":1,"ts":0.0,"dur":1.002},' \
  '{"name":"b","ph":"X","pid":1,"tid":1,"ts":1.001,"dur":2.0}]}' >"$tmp/overlap.json"
check "checker: a slice that starts inside the last and ends after it is dropped" \
  sh -c "! '$check' '$tmp/overlap.json' 2>/dev/null"
printf '%s\n' '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"args":{"name":"p"}},' \
  '{"name":"a","ph":"X","pid":1,"tid":1,"ts":0,"dur":1},' \
  '{"name":"b","ph":"X","pid":1,"tid":1,"ts":1,"dur":2}]}' >"$tmp/adjacent.json"
check "checker: a slice that starts where the last ends is kept" "$check" "$tmp/adjacent.json"
check "checker: one rank is not two" sh -c "! '$check' --ranks 2 '$tmp/adjacent.json' 2>/dev/null"
printf '%s\n' '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"args":{"name":"p"}},' \
  '{"name":"used GiB","ph":"C","pid":1,"ts":0,"args":{"GiB":1.5}}]}' >"$tmp/unit.json"
check "checker: a unit named twice" sh -c "! '$check' '$tmp/unit.json' 2>/dev/null"
printf '%s\n' '{"traceEvents":[{"name":"used","ph":"C","pid":7,"ts":0,"args":{"GiB":1.5}}]}' \
  >"$tmp/unnamed.json"
check "checker: a process without a name" sh -c "! '$check' '$tmp/unnamed.json' 2>/dev/null"

# a run record opens with its meta line (docs/record.md)
records=$(find "$src/tests/data/records" "$src/bench/results" -name '*.jsonl' | sort)
traced=0
for rec in $records; do
  head -c 4096 "$rec" | head -n 1 | grep -q '"type":"meta".*"schema":"vramledger.run/1"' || continue
  name=${rec#"$src"/}
  if ! "$vl" report "$rec" --format trace >"$tmp/t.json" 2>"$tmp/err"; then
    # a record report refuses (a cut meta, no samples) has no trace to check
    echo "skip $name: $(head -n 1 "$tmp/err")"
    continue
  fi
  traced=$((traced + 1))
  ranks=$(grep -E '"type":"(phase|step)"' "$rec" | grep -o '"pid":[0-9]*' | sort -u | wc -l)
  check "$name: Perfetto imports every slice, one process per rank ($ranks)" \
    "$check" --ranks "$ranks" "$tmp/t.json"
done
check "records traced" [ "$traced" -ge 5 ]

echo "$n checks, $fail failed"
[ $fail = 0 ]
