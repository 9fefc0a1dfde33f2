#!/bin/bash
# Do the sampler (at 10 ms) and the interposer's peak both catch a 2 GiB allocation held for 50 ms?
#   bench/gpu/run.sh spike
# bench/gpu/jobs/spike.py under `vramledger run --interval-ms 10`; writes
# $OUT/spike_report.json and spike_record.jsonl (bench/results/run-interposer/,
# generate-reserve/part4/). Needs build-rel/ (carry).
set -u
. bench/gpu/env.sh
mkdir -p "$o"
record_env "$o/env-spike.txt"
rm -rf /tmp/spike
$vl run --quiet --interval-ms 10 --out /tmp/spike -- python3 bench/gpu/jobs/spike.py
$vl report /tmp/spike --format json > "$o/spike_report.json"
cp /tmp/spike/record.jsonl "$o/spike_record.jsonl"
