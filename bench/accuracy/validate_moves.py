#!/usr/bin/env python3
"""Every validate table the estimator is judged by, and the runs whose
estimate moved between two of them.

    python3 bench/accuracy/validate_moves.py all [VRAMLEDGER] > FILE
        `vramledger validate --results` of the calibration set, the seven
        sets outside it (one file), the expandable segments runs and every
        whole-job DDP / ZeRO-1 rank on 2 H200s, each after its command line
    python3 bench/accuracy/validate_moves.py BEFORE.txt AFTER.txt
        runs whose estimate moved between two validate tables (text output
        of `vramledger validate` or of `all`): allocated and process-total
        error before and after, where either moved by more than half a point"""
import re, subprocess, sys

TABLES = ["data/reference/h200-torch-2.11/calibration-isolated.json",
          "data/reference/h200-torch-2.11/unseen-measured.json",
          "data/reference/h200-torch-2.11/expandable-segments.json",
          "data/reference/h200-torch-2.11/ddp-measured.json"]


def validate_all(vl):
    for f in TABLES:
        print("$ vramledger validate --results %s" % f, flush=True)
        rc = subprocess.run([vl, "validate", "--results", f]).returncode
        print("(exit %d)" % rc)
        print(flush=True)


def load(f):
    d = {}
    for l in open(f):
        m = re.match(r'\s+(\S+)\s+(cal|hold)\s+([\d.]+) /\s+([\d.]+)\s+([+-][\d.]+) %.*?([+-][\d.]+) %\s*$', l)
        if m: d[m.group(1)] = (float(m.group(5)), float(m.group(6)), m.group(2))
    return d


if sys.argv[1] == "all":
    validate_all(sys.argv[2] if len(sys.argv) > 2 else "build/vramledger")
    sys.exit(0)
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in a:
    if k in b and (abs(a[k][0]-b[k][0]) > 0.5 or abs(a[k][1]-b[k][1]) > 0.5):
        print('%-48s %s alloc %+5.1f -> %+5.1f   total %+5.1f -> %+5.1f' % (k, a[k][2], a[k][0], b[k][0], a[k][1], b[k][1]))
