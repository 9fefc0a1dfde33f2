#!/usr/bin/env python3
"""Summary of bench/gpu/jobs/ddp_rebuild_trials.py's lines: per setting, how many rank
trials kept DDP's first buckets at the rebuild (jump_b over half the
gradient bytes), the gap from the first step's backward to the second step
(median, min, max; sync and host loops), and the prediction
1 - gap / 100 ms (NCCL's watchdog looks every 100 ms) at the median gap.

  bench/accuracy/ddp_trials_summary.py trials.jsonl
"""
import collections
import json
import sys

groups = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        groups[(d["model"], d["tag"], d["loop"], d["pause"])].append(d)
print("%-16s %-34s %-5s %5s %6s %5s %9s %17s %9s %6s" % (
    "model", "tag", "loop", "pause", "trials", "kept", "kept/all", "gap ms med [range]",
    "predicted", "agree"))
for (model, tag, loop, pause), v in groups.items():
    kept = sum(d["jump_b"] > d["grad_b"] / 2 for d in v)
    # the rebuild's jump and the second step's peak tell the same story
    low = min(d["step2_peak_b"] for d in v)
    agree = sum((d["jump_b"] > d["grad_b"] / 2) == (d["step2_peak_b"] > low + d["grad_b"] / 2)
                for d in v)
    gaps = sorted(d["gap_ms"] for d in v if d["gap_ms"] is not None)
    if gaps:
        med = gaps[len(gaps) // 2]
        gap = "%5.1f [%5.1f, %5.1f]" % (med, gaps[0], gaps[-1])
        pred = "%.2f" % max(0.0, 1 - med / 100)
    else:
        gap, pred = "-", "-"
    print("%-16s %-34s %-5s %5.2f %6d %5d %9.2f %17s %9s %6d" % (
        model[:16], tag or "-", loop, pause, len(v), kept, kept / len(v), gap, pred, agree))
