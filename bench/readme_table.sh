#!/bin/sh
# Regenerate README.md's table of estimate vs measured (between the
# calibration-table markers) from the committed H200 measurements.
set -eu
cd "$(dirname "$0")/.."
bin=${VL_BIN:-build/vramledger}
results=bench/results/calibration/calibration-isolated.json
tmp=$(mktemp)
"$bin" validate --results "$results" --format md >"$tmp" || [ $? = 3 ]
python3 - "$tmp" <<'PY'
import re, sys
table = open(sys.argv[1]).read().replace("## estimate vs measured", "Estimate vs measured")
readme = open("README.md").read()
begin, end = "<!-- calibration-table:begin -->", "<!-- calibration-table:end -->"
new = re.sub(re.escape(begin) + ".*?" + re.escape(end), begin + "\n" + table + end, readme, flags=re.S)
open("README.md", "w").write(new)
PY
rm -f "$tmp"
