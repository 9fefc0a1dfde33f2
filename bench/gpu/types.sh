#!/bin/bash
# How close is the estimator on the model types beyond the first ten (measure.py's types suite)?
#   bench/gpu/run.sh types
# The types suite of measure.py (TYPES: further decoders, MoE, MLA, encoders,
# encoder-decoders, vision models; each configuration in a process of its
# own), on the GPU machine. Run from the repository root; writes
# $OUT/types-measured.json and the log $OUT/types-measure.log.
set -euo pipefail
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 python/vramledger/measure.py "$OUT/types-measured.json" --suite types 2>&1 | tee "$OUT/types-measure.log"
