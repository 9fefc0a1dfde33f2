#!/usr/bin/env python3
"""Every measured set this repository holds, validated by one vramledger.

    python3 bench/accuracy/all_sets.py BIN > sets.tsv     (from the repository root)
    python3 bench/accuracy/all_sets.py --stats sets.tsv
    python3 bench/accuracy/all_sets.py --diff before.tsv after.tsv

The sets: every measure.py results file (schema vramledger.measure/1)
under data/reference/ and bench/results/, tracked or a line of a results
folder's raw.jsonl (bench/raw.py), each through `BIN validate --results
FILE --format json`. One line a compared run: the set (its path), the
run, and the estimate's error against the measurement in percent: peak
allocated, peak reserved, process total against NVML, step time ("nan"
where the set has no such figure). A run measured in several files is a
line of each (repeats of a suite on other leases, the perturbation
runs).

--stats: for each figure the runs, the median and largest |error|, those
more than 2 % under, and the sum of |error| (a change that moves one run
moves it); then the runs more than 2 % under in reserved. --diff: the
runs whose errors differ between two such files.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

COLS = ("error_allocated_pct", "error_reserved_pct", "error_total_pct", "error_step_pct")


def results_files(tmp):
    """(path to read, path it names itself by): tracked files, then raw.jsonl members"""
    out = []
    for top in ("data/reference", "bench/results"):
        for d, _, files in sorted(os.walk(top)):
            out += [(os.path.join(d, f),) * 2 for f in sorted(files) if f.endswith(".json")]
    for q in sorted(os.listdir("bench/results")):
        raw = os.path.join("bench/results", q, "raw.jsonl")
        if not os.path.exists(raw):
            continue
        with open(raw) as f:
            for line in f:
                d = json.loads(line)
                if "json" not in d or not d["file"].endswith(".json"):
                    continue
                named = os.path.join("bench/results", q, d["file"])
                if os.path.exists(named):
                    continue
                path = os.path.join(tmp, q, d["file"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as g:
                    json.dump(d["json"], g)
                out.append((path, named))
    return out


def validate(vl, tmp):
    seen = set()
    for path, named in results_files(tmp):
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or d.get("schema") != "vramledger.measure/1":
            continue
        r = subprocess.run([vl, "validate", "--results", path, "--format", "json"],
                           capture_output=True, text=True)
        try:
            runs = json.loads(r.stdout)["runs"]
        except (ValueError, KeyError):
            print("all_sets.py: %s: not validated: %s" % (named, r.stderr.strip()[:300]),
                  file=sys.stderr)
            continue
        for x in runs:
            if not x.get("compared") or (named, x["name"]) in seen:
                continue
            seen.add((named, x["name"]))
            cells = ["%.3f" % x[c] if x.get(c) is not None else "nan" for c in COLS]
            print("\t".join([named, x["name"]] + cells))


def rows(path):
    with open(path) as f:
        return {tuple(r[:2]): r for r in (l.rstrip("\n").split("\t") for l in f)}


def stats(path):
    rs = list(rows(path).values())
    for col, name in enumerate(("allocated", "reserved", "total", "step"), start=2):
        v = [float(r[col]) for r in rs if r[col] != "nan"]
        a = [abs(x) for x in v]
        print("%-9s %4d runs  median |error| %.2f %%  max %.2f %%  more than 2 %% under %d  "
              "sum of |error| %.1f" % (name, len(v), statistics.median(a), max(a),
                                        sum(1 for x in v if x < -2), sum(a)))
    for r in sorted(rs, key=lambda r: float(r[3]) if r[3] != "nan" else 0):
        if r[3] != "nan" and float(r[3]) < -2:
            print("  reserved %+.2f %%  %s  (%s)" % (float(r[3]), r[1], r[0]))


def diff(a, b):
    ra, rb = rows(a), rows(b)
    for k in sorted(ra):
        if k in rb and ra[k][2:5] != rb[k][2:5]:
            print("%s  %s  allocated %s -> %s  reserved %s -> %s  total %s -> %s" %
                  (k[1], k[0], ra[k][2], rb[k][2], ra[k][3], rb[k][3], ra[k][4], rb[k][4]))


def main(argv):
    if len(argv) == 2 and argv[0] == "--stats":
        stats(argv[1])
    elif len(argv) == 3 and argv[0] == "--diff":
        diff(argv[1], argv[2])
    elif len(argv) == 1:
        with tempfile.TemporaryDirectory() as tmp:
            validate(os.path.abspath(argv[0]), tmp)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
