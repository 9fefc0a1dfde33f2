#!/usr/bin/env python3
"""The table of bench/results/trace/README.md#trace-batch from its
batch.jsonl: for each configuration, the CPU dry run at the first batch
replayed at every batch (`vramledger trace --batch`) against the job's own
max_memory_allocated/reserved on the H200 at that batch.
Usage: python3 bench/accuracy/trace_batch_table.py batch.jsonl"""
import json
import sys

print("| configuration | traced at | batch | H200 max allocated (MiB) | replay: allocated | "
      "H200 max reserved (MiB) | replay: reserved |")
print("|---|---:|---:|---:|---:|---:|---:|")
worst_a = worst_r = 0.0
for line in open(sys.argv[1]):
    r = json.loads(line)
    reps = {x["batch"]: x for x in r["cpu"]["replays"]}
    traced = r["cpu"]["batch"]
    for b, g in r["gpu"].items():
        x = reps[int(b)]
        ea = 100 * (x["peak_allocated_bytes"] - g["max_allocated"]) / g["max_allocated"]
        er = 100 * (x["peak_reserved_bytes"] - g["max_reserved"]) / g["max_reserved"]
        if int(b) != traced:
            worst_a, worst_r = max(worst_a, abs(ea)), max(worst_r, abs(er))
        print("| %s | %d | %s | %.1f | %+.2f %% | %.1f | %+.2f %% |" % (
            r["name"], traced, b, g["max_allocated"] / 2**20, ea, g["max_reserved"] / 2**20, er))
print("\nReplayed at another batch than traced: allocated within %.2f %%, reserved within %.2f %%."
      % (worst_a, worst_r))
