#!/usr/bin/env python3
"""Runs whose estimate moved between two validate tables (text output of
`vramledger validate` or bench/accuracy/validate-all.sh): allocated and process-total
error before and after, where either moved by more than half a point.

    python3 bench/accuracy/validate_moves.py BEFORE.txt AFTER.txt"""
import re, sys
def load(f):
    d = {}
    for l in open(f):
        m = re.match(r'\s+(\S+)\s+(cal|hold)\s+([\d.]+) /\s+([\d.]+)\s+([+-][\d.]+) %.*?([+-][\d.]+) %\s*$', l)
        if m: d[m.group(1)] = (float(m.group(5)), float(m.group(6)), m.group(2))
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in a:
    if k in b and (abs(a[k][0]-b[k][0]) > 0.5 or abs(a[k][1]-b[k][1]) > 0.5):
        print('%-48s %s alloc %+5.1f -> %+5.1f   total %+5.1f -> %+5.1f' % (k, a[k][2], a[k][0], b[k][0], a[k][1], b[k][1]))
