#!/bin/sh
# Regenerate every table of README.md from the committed H200 results:
# - the calibration set, estimate vs measured (between the calibration-table
#   markers): `vramledger validate --results` of
#   data/reference/h200-torch-2.11/calibration-isolated.json;
# - the model types (the list item of model-types/, its other shapes too):
#   bench/accuracy/compare.py types-table over their measurements,
#   data/reference/h200-torch-2.11/types-measured.json and
#   types-unseen-measured.json.
# - bench/results/model-types/validate.txt and validate-unseen.txt: `vramledger validate --results`
#   of the measured file, as README says.
# With --check, README.md is left as it is and the exit status is 1 when a
# table would change (the difference printed).
#   bench/accuracy/tables.sh [--check]   (VL_BIN: the vramledger to use, default build/vramledger)
set -eu
cd "$(dirname "$0")/../.."
bin=${VL_BIN:-build/vramledger}
r=bench/results
ref=data/reference/h200-torch-2.11
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" validate --results $ref/calibration-isolated.json --format md >"$tmp/calibration.md" || [ $? = 3 ]
"$bin" validate --results $ref/types-measured.json >"$tmp/validate.txt" || [ $? = 3 ]
"$bin" validate --results $ref/types-unseen-measured.json >"$tmp/validate-unseen.txt" ||
  [ $? = 3 ]
python3 bench/accuracy/compare.py types-table "$bin" $ref/types-measured.json \
  $ref/types-unseen-measured.json >"$tmp/types.md"
python3 - "$tmp" <<'PY'
import re, sys
tmp = sys.argv[1]
readme = open("README.md").read()
table = open(tmp + "/calibration.md").read().replace("## estimate vs measured", "Estimate vs measured")
begin, end = "<!-- calibration-table:begin -->", "<!-- calibration-table:end -->"
readme = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: begin + "\n" + table + end, readme, flags=re.S)
types = open(tmp + "/types.md").read()
head = types.splitlines()[0]
lines = readme.split("\n")
i = lines.index(head)
j = i
while j < len(lines) and lines[j].startswith("  |"):
    j += 1
lines[i:j] = types.rstrip("\n").split("\n")
open(tmp + "/README.md", "w").write("\n".join(lines))
PY
if [ "${1:-}" = --check ]; then
  diff -u README.md "$tmp/README.md"
  for v in validate validate-unseen; do diff -u $r/model-types/$v.txt "$tmp/$v.txt"; done
else
  cp "$tmp/README.md" README.md
  for v in validate validate-unseen; do cp "$tmp/$v.txt" $r/model-types/$v.txt; done
fi
