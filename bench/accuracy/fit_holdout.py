#!/usr/bin/env python3
"""Fit on part of a real sweep, predict the held-out points, print a
Markdown table. Usage: python3 bench/accuracy/fit_holdout.py VL CSV HOLD [COLUMN]
HOLD: a batch (an integer: that batch's points are held out), or
"seq=S" (that sequence length's points). COLUMN: the measured peak to fit
(default peak_bytes, the process; or peak_allocated_bytes, ...), or
"by-phase": `fit --by-phase` (forward/backward and optimizer peaks
fitted apart), judged on peak_allocated_bytes."""
import csv, json, subprocess, sys, tempfile

vl, name, hold = sys.argv[1], sys.argv[2], sys.argv[3]
col = sys.argv[4] if len(sys.argv) > 4 else "peak_bytes"
var, val = hold.split("=") if "=" in hold else ("batch", hold)
rows = list(csv.DictReader(open(name)))
train = [r for r in rows if int(r[var]) != int(val)]
test = [r for r in rows if int(r[var]) == int(val)]
phase = col == "by-phase"
if phase:
    col = "peak_allocated_bytes"
    cols = ["batch", "seq", "peak_allocated_bytes", "peak_fwd_bwd_bytes", "peak_optimizer_bytes", "status"]
else:
    cols = ["batch", "seq", col, "status"]
with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    f.write(",".join(cols if phase else ["batch", "seq", "peak_bytes", "status"]) + "\n")
    for r in train:
        f.write(",".join(r[c] for c in cols) + "\n")
args = [vl, "fit", "--csv", f.name, "--format", "json"] + (["--by-phase"] if phase else [])
for r in test:
    args += ["--predict", f"batch={r['batch']},seq={r['seq']}"]
d = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
how = "by phase, " if phase else ""
print(f"`{name}` ({how}{col}): fit on {d['points']} points (terms {', '.join(d['coefficients'])}), R² {d['r2']:.5f}, "
      f"leave-one-out {100 * d['loo_rel_rms']:.2f} % rms; held out: {var} {val}\n")
print("| batch | seq | measured bytes | predicted bytes | error |" + (" peak in |" if phase else "")
      + "\n|---:|---:|---:|---:|---:|" + ("---|" if phase else ""))
for r, p in zip(test, d["predictions"]):
    m = int(r[col])
    print(f"| {r['batch']} | {r['seq']} | {m:,} | {p['peak_bytes']:,} | {100 * (p['peak_bytes'] - m) / m:+.2f} % |"
          + (f" {p['phase']} |" if phase else ""))
