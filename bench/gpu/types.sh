#!/bin/bash
# The model types' question (bench/results/model-types/): its suites.
# bench/gpu/run.sh SUITE [ARGS] runs suite_SUITE below (VL_SUITE names it;
# without it, suite_types).
#
# suite types: How close is the estimator on the model types beyond the first ten (measure.py's types suite)?
#   bench/gpu/run.sh types
# The types suite of measure.py (TYPES: further decoders, MoE, MLA, encoders,
# encoder-decoders, vision models; each configuration in a process of its
# own), on the GPU machine. Run from the repository root; writes
# $OUT/types-measured.json and the log $OUT/types-measure.log.
#
# suite types-unseen: How close is the estimator on other shapes of the types suite's models, written down before they were measured?
#   bench/gpu/run.sh types-unseen [NAME...]
# The configurations of bench/configs/types-unseen.jsonl (other shapes of
# the model types, written before they were measured), each measured by
# measure.py --config in a process of its own; then, beside them, what is
# live at the peak of the types suite's runs that the estimator misses
# (bench/gpu/jobs/model_facts.py type-peaks). On the GPU machine, from the repository root.

suite_types() {
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 python/vramledger/measure.py "$OUT/types-measured.json" --suite types 2>&1 | tee "$OUT/types-measure.log"
}

suite_types_unseen() {
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT/unseen"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
while IFS= read -r line; do
  n=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["name"])' "$line")
  python3 python/vramledger/measure.py "$OUT/unseen/$n.json" --config "$line" 2>&1 | tail -2 || true
done < bench/configs/types-unseen.jsonl
python3 - "$OUT" <<'PY'
import glob, json, sys
out = sys.argv[1]
runs, head = [], None
for p in sorted(glob.glob(out + "/unseen/*.json")):
    d = json.load(open(p))
    head = head or {k: v for k, v in d.items() if k != "runs"}
    runs += d["runs"]
head["suite"] = "bench/configs/types-unseen.jsonl"
head["runs"] = runs
json.dump(head, open(out + "/types-unseen-measured.json", "w"), indent=1)
PY
rm -rf "$OUT/unseen"
python3 bench/gpu/jobs/model_facts.py type-peaks "$OUT/type-peaks.json" "$@"
}

suite=${VL_SUITE:-types}
"suite_${suite//-/_}" "$@"
