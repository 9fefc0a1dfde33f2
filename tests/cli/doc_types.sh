#!/bin/sh
# The model types docs/cmd/estimate.md lists (after "model_type:", up to
# the first period) are the ones the binary reads (VL_MODEL_TYPES, which
# a config without a model_type is told), in the same order.
set -u
bin=$1
page=$2
tmp=${TMPDIR:-/tmp}/vl-doc-types.$$
trap 'rm -f "$tmp".*' EXIT
printf '{}' >"$tmp.json"
"$bin" estimate --model "$tmp.json" 2>"$tmp.err" >/dev/null
have=$(sed -n 's/.*; supported: //p' "$tmp.err" | tr -d ' ')
doc=$(awk '/model_type: /{on=1; sub(/.*model_type: /, "")} on{print} on && /\./{exit}' "$page" |
  tr '\n' ' ' | sed 's/\..*//' | sed 's/ ([^)]*)//g' | tr -d ' ')
if [ -z "$have" ] || [ "$have" != "$doc" ]; then
  echo "FAIL: $page lists: $doc"
  echo "      the binary reads: $have"
  exit 1
fi
echo "ok: $(echo "$have" | tr ',' '\n' | wc -l) model types listed in $page"
