#!/usr/bin/env python3
"""The tables of bench/results/2026-11-29-h200x2-ddp/README.md: every rank's
peak against `vramledger estimate --dp/--zero` for the same job, and the
step time from 1 to 2 GPUs. Usage: python3 bench/multi_gpu_table.py DIR"""
import json
import os
import sys

d = sys.argv[1]
est = {}
for dp, z in ((1, 0), (2, 0), (2, 2), (2, 3)):
    with open(os.path.join(d, "estimate-dp%d-zero%d.json" % (dp, z))) as f:
        est[(dp, z)] = json.load(f)["peak_allocated_bytes"]
zero = {"ddp": 0, "ddp-under-vl-run": 0, "fsdp-grad-op": 2, "fsdp-full": 3}
rows = []
for name in ("multi.jsonl", "ddp-repeat.jsonl"):
    for line in open(os.path.join(d, name)):
        r = json.loads(line)
        r["file"] = name
        rows.append(r)
print("| run | mode | GPUs | rank | measured peak allocated (MiB) | estimate (MiB) | error |")
print("|---|---|---:|---:|---:|---:|---:|")
worst = 0.0
for r in rows:
    w, m = r["world"], r["mode"]
    z = zero.get(m.replace("-run-probe", "").replace("-run-noprobe", ""), 0)
    # a world of 1: DDP still builds its buckets; FSDP falls back to NO_SHARD
    e = est[(2, 0)] if m.startswith("ddp") else est[(w, 0 if w == 1 else z)]
    if m.startswith("ddp") and w == 1:
        e = est[(2, 0)]
    err = 100.0 * (e - r["max_allocated"]) / r["max_allocated"]
    if w == 2:
        worst = max(worst, abs(err))
    print("| %s | %s | %d | %d | %.1f | %.1f | %+.1f %% |" % (
        r["file"], m, w, r["rank"], r["max_allocated"] / 2**20, e / 2**20, err))
print("\nOn 2 GPUs, every rank within %.1f %% of the estimate." % worst)
print("\n| mode | step on 1 GPU (ms) | step on 2 GPUs (ms, mean of ranks) | scaling efficiency |")
print("|---|---:|---:|---:|")
for m in ("ddp", "fsdp-grad-op", "fsdp-full"):
    one = [r["step_s_median"] for r in rows if r["file"] == "multi.jsonl" and r["mode"] == m and r["world"] == 1]
    two = [r["step_s_median"] for r in rows if r["file"] == "multi.jsonl" and r["mode"] == m and r["world"] == 2]
    if one and two:
        t1, t2 = one[0], sum(two) / len(two)
        print("| %s | %.1f | %.1f | %.2f |" % (m, 1000 * t1, 1000 * t2, t1 / t2))
