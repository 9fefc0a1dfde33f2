#!/usr/bin/env python3
"""The phase split that `fit` lacks (issue 6), tried on a real sweep: per
point, the probe's peak allocated over the forward/loss/backward phases and
over the optimizer phases (steps >= 2); the activation phases fitted with
const, b, bs, bs2 on every batch but 8, the optimizer phase as the mean of
those points; the held-out batch-8 points predicted as the larger of the
two. Usage: python3 bench/fit_phases.py SWEEP_DIR... (each with sweep.csv
and its point records)."""
import json, csv, glob, os, sys
import numpy as np  # Debian python3-numpy (a dependency of python3-torch)
def points(d):
    rows = list(csv.DictReader(open(d + "/sweep.csv")))
    out = []
    for r in rows:
        rec = glob.glob(d + "/point-%03d-r0/record.jsonl" % int(r["point"]))[0]
        act = opt = 0
        for l in open(rec):
            e = json.loads(l)
            if e.get("type") == "phase" and e.get("step", 0) >= 2:
                if e["phase"] in ("forward", "loss", "backward"): act = max(act, e["peak_allocated"])
                elif e["phase"] in ("pre_step", "optimizer"): opt = max(opt, e["peak_allocated"])
        out.append((int(r["batch"]), int(r["seq"]), int(r["peak_allocated_bytes"]), act, opt))
    return out
for d in sys.argv[1:]:
    m = os.path.basename(d.rstrip("/"))
    P = points(d)
    tr = [p for p in P if p[0] != 8]; te = [p for p in P if p[0] == 8]
    X = lambda b, s: [1, b, b * s, b * s * s]
    A = np.array([X(b, s) for b, s, *_ in tr], float)
    ca = np.linalg.lstsq(A, np.array([p[3] for p in tr], float), rcond=None)[0]
    co = np.mean([p[4] for p in tr])
    for b, s, peak, act, opt in te:
        pred = max(np.dot(X(b, s), ca), co)
        print(m, b, s, "measured", peak, "act", act, "opt", opt, "pred %.0f err %+.2f%%" % (pred, 100 * (pred - peak) / peak))
