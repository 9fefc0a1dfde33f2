#!/usr/bin/env python3
"""Host seconds per traced ATen op: the tiny models' measured steps
(bench/time/host.sh: no kernel long enough to hide the host) against the
ops `vramledger trace` counts for the same jobs, a line through them by
Theil-Sen (as host_fit.py fits estimate's own op count). The ops are those
dispatched in the passes priced op by op (forward, backward, between
backward and optimizer.step), a recomputed op at 15.9 / 8.6 of one
(lib/decide/steptime.c RECOMPUTE_HOST); views and empty tensors counted
with the rest, then without (kernels only), for the two lines.

  python3 bench/time/trace_host_fit.py VRAMLEDGER HOST.json TRACES_DIR
(TRACES_DIR: bench/time/trace_compare.py --traces of the same runs)"""
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl

exe, path, traces = sys.argv[1:4]
RECOMPUTE_HOST = 15.9 / 8.6


def theil_sen(xs, ys):
    n = len(xs)
    slope = statistics.median([(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n)
                               if xs[j] != xs[i]])
    return slope, statistics.median([y - slope * x for x, y in zip(xs, ys)])


xs, ks, ys = [], [], []
for r in json.loads(text_of(path))["runs"]:
    m = (r.get("measured") or {}).get("step_median_s")
    t = os.path.join(traces, r["name"] + ".trace")
    if not m or not os.path.exists(t):
        continue
    d = json.loads(subprocess.run([exe, "trace", "--replay", t, "--gpu", "h200", "--format", "json"],
                                  capture_output=True, text=True, check=True).stdout)["time"]
    p = d["phase_ops"]
    ops = p["forward"] + p["backward"] + p["prestep"] + RECOMPUTE_HOST * p["recompute"]
    xs.append(ops)
    ks.append(d["kernels"])
    ys.append(m)
    print("%-34s %.4f s %7.0f ops %6.0f kernels %.2f us/op" % (r["name"], m, ops, d["kernels"], 1e6 * m / ops))
for label, x in (("every op", xs), ("kernels only", ks)):
    s, c = theil_sen(x, ys)
    res = [abs(y - (s * v + c)) / y for v, y in zip(x, ys)]
    print("Theil-Sen, %s: %.4g s an op, %.4g s a step; median |residual| %.1f %%, worst %.1f %%"
          % (label, s, c, 100 * statistics.median(res), 100 * max(res)))
