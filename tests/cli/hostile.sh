#!/bin/sh
# A hostile string in every field of a record that a page prints (the
# command, host, driver, GPU name, a phase, a mark:
# tests/data/records/hostile-strings.jsonl) never reaches the HTML as
# markup: no "<script>", "</script>" or "<base" of the record's, in the
# page's text or inside its chart data. usage: hostile.sh VRAMLEDGER DATA_DIR
set -u
vl=$1
data=$2
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$vl" report "$data/records/hostile-strings.jsonl" --format html >"$tmp/page.html"
check "the page is written" [ -s "$tmp/page.html" ]
check "no script of the record's" sh -c "! grep -q '<script>alert' '$tmp/page.html'"
check "no end of a script block of the record's" sh -c "! grep -q 'alert(1)</script>' '$tmp/page.html'"
check "no base element" sh -c "! grep -q '<base href' '$tmp/page.html'"
check "the string is there, escaped, in the text" grep -q 'alert(1)&lt;/script&gt;' "$tmp/page.html"
check "and in the chart data" grep -q 'alert(1)\\u003c\\/script\\u003e' "$tmp/page.html"
echo "$n checks, $fail failed"
[ "$fail" = 0 ]
