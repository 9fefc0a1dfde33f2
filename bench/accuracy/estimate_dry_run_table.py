#!/usr/bin/env python3
"""`vramledger estimate --dry-run` against the H200: for each entry of
bench/configs/estimate-dry-run.txt, the peaks of DIR/NAME.json (the
estimate's JSON, its "dry_run" object; an automatic dry run for a model
type the formula does not describe) beside the peak the H200 measured for
the same job: DIR/NAME.measured.json when bench/gpu/run.sh estimate-dry-run
measured it, else measure.py's records (bench/accuracy/dry_run_table.py's lists).
Prints a Markdown table and a summary; --json writes the rows.

  python3 bench/accuracy/estimate_dry_run_table.py DIR [--json OUT]
"""
import argparse
import json
import os
import statistics

from dry_run_table import OTHER, ROOT, measured, pct


def entries():
    for line in open(os.path.join(ROOT, "bench", "configs", "estimate-dry-run.txt")):
        if line.strip() and not line.startswith("#"):
            yield line.split()[0]


def row(d, name, known):
    r = {"name": name}
    try:
        est = json.load(open(os.path.join(d, name + ".json")))
    except (OSError, ValueError) as ex:
        return dict(r, error="no estimate: %s" % ex)
    m = os.path.join(d, name + ".measured.json")
    if os.path.exists(m):
        run = json.load(open(m))["runs"][0]
        meas = run.get("measured") if not run.get("error") else None
    else:
        meas = known.get(name)
    dr = est.get("dry_run") or {}
    r.update(automatic=dr.get("automatic"), approximate=est.get("approximate"), seconds=dr.get("seconds"),
             dry_alloc=dr.get("peak_allocated_bytes"), dry_reserved=dr.get("peak_reserved_bytes"),
             formula_alloc=est.get("peak_allocated_bytes"))
    if not meas:
        return dict(r, error="no measurement")
    r.update(measured_alloc=meas["peak_allocated"], measured_reserved=meas["peak_reserved"],
             err_alloc=pct(r["dry_alloc"], meas["peak_allocated"]),
             err_reserved=pct(r["dry_reserved"], meas["peak_reserved"]),
             err_formula=pct(r["formula_alloc"], meas["peak_allocated"]))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json")
    a = ap.parse_args()
    known = measured(OTHER)
    rows = [row(a.dir, n, known) for n in entries()]
    print("| entry | how | measured alloc GiB | dry run GiB | error | reserved error | formula error | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    g = 2.0 ** 30
    for r in rows:
        if r.get("error"):
            print("| %s | %s | | | | | | |" % (r["name"], r["error"]))
            continue
        how = "automatic (type not described)" if r["automatic"] else "--dry-run"
        print("| %s | %s | %.2f | %.2f | %+.1f %% | %+.1f %% | %+.1f %% | %.0f |" % (
            r["name"], how, r["measured_alloc"] / g, r["dry_alloc"] / g, r["err_alloc"], r["err_reserved"],
            r["err_formula"], r["seconds"]))
    ok = [r for r in rows if not r.get("error")]
    errs = [abs(r["err_alloc"]) for r in ok]
    print("\n%d of %d entries ran; peak allocated |error| median %.1f %%, worst %.1f %%; peak reserved worst %.1f %%"
          % (len(ok), len(rows), statistics.median(errs) if errs else 0, max(errs, default=0),
             max((abs(r["err_reserved"]) for r in ok), default=0)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
