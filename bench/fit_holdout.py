#!/usr/bin/env python3
"""Fit on part of a real sweep, predict the held-out points (the largest
batch), print a Markdown table. Usage: python3 bench/fit_holdout.py VL CSV BATCH"""
import csv, json, subprocess, sys, tempfile

vl, name, hold = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = list(csv.DictReader(open(name)))
train = [r for r in rows if int(r["batch"]) != hold]
test = [r for r in rows if int(r["batch"]) == hold]
with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    f.write("batch,seq,peak_bytes,status\n")
    for r in train:
        f.write(f"{r['batch']},{r['seq']},{r['peak_bytes']},{r['status']}\n")
args = [vl, "fit", "--csv", f.name, "--format", "json"]
for r in test:
    args += ["--predict", f"batch={r['batch']},seq={r['seq']}"]
d = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
print(f"`{name}`: fit on {d['points']} points (terms {', '.join(d['coefficients'])}), R² {d['r2']:.5f}, "
      f"leave-one-out {100 * d['loo_rel_rms']:.2f} % rms; held out: batch {hold}\n")
print("| batch | seq | measured bytes | predicted bytes | error |\n|---:|---:|---:|---:|---:|")
for r, p in zip(test, d["predictions"]):
    m = int(r["peak_bytes"])
    print(f"| {r['batch']} | {r['seq']} | {m:,} | {p['peak_bytes']:,} | {100 * (p['peak_bytes'] - m) / m:+.2f} % |")
