#!/usr/bin/env python3
"""The dry run against the H200: for each entry of a dry-run.jsonl
(bench/gpu/jobs/dry_run.py), the trace's peak allocated and reserved next to what the
H200 measured for the same job (measure.py's records below), and, when a
memtracker.jsonl sits beside it, MemTracker's peak. With --vl, each
trace of DIR/traces.tar.xz is replayed again by that vramledger with the
peaks from the mark `measure` on (trace --from-mark: the step the H200
measured, after measure.py's reset_peak_memory_stats()); an entry whose
trace is not kept takes its replay from DIR/replays.jsonl (the same replay,
made when the traces were at hand). Prints a Markdown
table and a summary; --json writes the rows.

  python3 bench/accuracy/dry_run_table.py DIR [--vl build/vramledger] [--measured FILE] [--json OUT]

By its first argument, also:

  estimate: `vramledger estimate --dry-run` against the H200: for each entry
    of bench/configs/estimate-dry-run.txt, the peaks of DIR/NAME.json (the
    estimate's JSON, its "dry_run" object; an automatic dry run for a model
    type the formula does not describe) beside the peak the H200 measured for
    the same job: DIR/NAME.measured.json when bench/gpu/run.sh
    estimate-dry-run measured it, else measure.py's records
    (bench/accuracy/dry_run_table.py's lists). Prints a Markdown table and a
    summary; --json writes the rows.
  known-misses: The estimator's known misses against the H200: for each entry
    of bench/configs/known-misses.json, the measured peaks
    (DIR/NAME.measured.json, bench/gpu/run.sh known-misses; the committed ones
    in data/reference/h200-torch-2.11/), the dry run's (DIR/NAME.dry.json,
    `vramledger trace` on meta or CPU) and the formula's (`vramledger
    estimate`, run now with VL). Prints a Markdown table. python3
    bench/accuracy/dry_run_table.py known-misses DIR [--vl build/vramledger]
"""
import sys
import argparse
import json
import os
import statistics
import subprocess
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEASURED = ("data/reference/h200-torch-2.11/calibration-isolated.json", "data/reference/h200-torch-2.11/types-measured.json",
            "data/reference/h200-torch-2.11/types-unseen-measured.json")
# measure.py runs of the other questions (known misses, estimate --dry-run's new jobs)
OTHER = ("data/reference/h200-torch-2.11/other-measured.json", "data/reference/h200-torch-2.11/infer-gpt2m-fp32-b8.json",
         "data/reference/h200-torch-2.11/infer-gpt2m-fp32-b16.json", "data/reference/h200-torch-2.11/infer-smollm3.json")
GIB = float(1 << 30)


def measured(extra=()):
    out = {}
    for p in MEASURED + tuple(extra):
        for r in json.load(open(os.path.join(ROOT, p)))["runs"]:
            if r.get("measured") and not r.get("error"):
                out[r["name"]] = dict(r["measured"], source=p, task=r.get("task", "train"))
    return out


def replays(d, vl):
    """name -> the trace JSON of a replay from the mark `measure`"""
    out = {}
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(os.path.join(d, "traces.tar.xz")) as t:
        t.extractall(tmp)
        for f in sorted(os.listdir(tmp)):
            p = subprocess.run([vl, "trace", "--replay", os.path.join(tmp, f), "--from-mark", "measure",
                                "--gpu", "h200", "--format", "json"], capture_output=True, text=True)
            if p.returncode == 0:
                out[f[:-len(".trace")]] = json.loads(p.stdout)
    return out


def pct(a, b):
    return None if a is None or not b else 100.0 * (a - b) / b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json")
    ap.add_argument("--measured", action="append", default=[],
                    help="another measure.py results file; its measurements win over the suites' files")
    ap.add_argument("--vl", help="replay the traces again from the mark `measure` with this binary")
    a = ap.parse_args()
    meas = measured(a.measured)
    again = {}
    kept = os.path.join(a.dir, "replays.jsonl")
    if a.vl and os.path.exists(kept):
        for line in open(kept):
            r = json.loads(line)
            again[r["name"]] = r["trace"]
    if a.vl:
        again.update(replays(a.dir, a.vl))
    mt = {}
    mp = os.path.join(a.dir, "memtracker.jsonl")
    if os.path.exists(mp):
        for line in open(mp):
            r = json.loads(line)
            peaks = r.get("peak") or {}
            mt[r["name"]] = max((v for k, v in peaks.items() if k.startswith("cuda") and v), default=None) \
                if not r.get("error") else r["error"].split(":")[0]
    rows = []
    for line in open(os.path.join(a.dir, "dry-run.jsonl")):
        r = json.loads(line)
        m = meas.get(r["name"], {})
        t = again.get(r["name"]) or r.get("trace") or {}
        rep = (t.get("replays") or [{}])[0]
        pa, pr = rep.get("peak_allocated_bytes"), rep.get("peak_reserved_bytes")
        ok = r["rc"] == 0 and pa
        mtr = mt.get(r["name"])
        rows.append({"name": r["name"], "device": r["device"], "rc": r["rc"], "seconds": r["seconds"],
                     "measured_alloc": m.get("peak_allocated"), "measured_reserved": m.get("peak_reserved"),
                     "dry_alloc": pa if ok else None, "dry_reserved": pr if ok else None,
                     "err_alloc": pct(pa, m.get("peak_allocated")) if ok else None,
                     "err_reserved": pct(pr, m.get("peak_reserved")) if ok else None,
                     "memtracker": mtr if isinstance(mtr, int) else None,
                     "memtracker_error": mtr if isinstance(mtr, str) else None,
                     "err_memtracker": pct(mtr, m.get("peak_allocated")) if isinstance(mtr, int) else None})
    print("| entry | dry run on | measured alloc GiB | dry run GiB | error | reserved error | MemTracker error |")
    print("|---|---|---:|---:|---:|---:|---:|")

    def f(x, fmt="%+.1f %%"):
        return "—" if x is None else fmt % x
    for w in rows:
        dry = f(w["dry_alloc"] and w["dry_alloc"] / GIB, "%.2f") if w["dry_alloc"] else "failed (%s)" % w["rc"]
        print("| %s | %s | %s | %s | %s | %s | %s |" % (
            w["name"], w["device"], f(w["measured_alloc"] and w["measured_alloc"] / GIB, "%.2f"), dry,
            f(w["err_alloc"]), f(w["err_reserved"]),
            f(w["err_memtracker"]) if w["memtracker"] else (w["memtracker_error"] or "—")))
    errs = [abs(w["err_alloc"]) for w in rows if w["err_alloc"] is not None]
    res = [abs(w["err_reserved"]) for w in rows if w["err_reserved"] is not None]
    if errs:
        print("\n%d of %d entries ran; peak allocated |error| median %.1f %%, worst %.1f %%, within 2 %%: %d, "
              "within 5 %%: %d; peak reserved worst %.1f %%" % (
                  len(errs), len(rows), statistics.median(errs), max(errs), sum(e <= 2 for e in errs),
                  sum(e <= 5 for e in errs), max(res) if res else float("nan")))
    if a.json:
        with open(a.json, "w") as g:
            json.dump(rows, g, indent=1)


def mode_estimate():
    """`vramledger estimate --dry-run` against the H200: for each entry of
    bench/configs/estimate-dry-run.txt, the peaks of DIR/NAME.json (the
    estimate's JSON, its "dry_run" object; an automatic dry run for a model
    type the formula does not describe) beside the peak the H200 measured for
    the same job: DIR/NAME.measured.json when bench/gpu/run.sh estimate-dry-run
    measured it, else measure.py's records (bench/accuracy/dry_run_table.py's lists).
    Prints a Markdown table and a summary; --json writes the rows.

      python3 bench/accuracy/dry_run_table.py estimate DIR [--json OUT]"""



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


def mode_known_misses():
    """The estimator's known misses against the H200: for each entry of
    bench/configs/known-misses.json, the measured peaks (DIR/NAME.measured.json,
    bench/gpu/run.sh known-misses; the committed ones in data/reference/h200-torch-2.11/), the dry run's (DIR/NAME.dry.json, `vramledger
    trace` on meta or CPU) and the formula's (`vramledger estimate`, run now
    with VL). Prints a Markdown table.
      python3 bench/accuracy/dry_run_table.py known-misses DIR [--vl build/vramledger]"""


    G = float(1 << 30)


    def flags(c):
        a = ["--model", c["model"], "--batch", str(c["batch"]), "--seq", str(c["seq"]), "--precision",
             c["precision"], "--attention", c["attention"]]
        if c["task"] == "infer":
            return a + ["--task", "infer", "--new-tokens", str(c["new_tokens"])]
        return a + ["--optimizer", c["optimizer"], "--optimizer-impl", c["optimizer_impl"], "--checkpointing",
                    c["checkpointing"]]


    def main():
        ap = argparse.ArgumentParser()
        ap.add_argument("dir")
        ap.add_argument("--vl", default=os.path.join(ROOT, "build", "vramledger"))
        a = ap.parse_args()
        print("| entry | measured alloc / reserved GiB | dry run alloc, reserved | formula alloc, reserved |")
        print("|---|---:|---:|---:|")
        committed = measured(OTHER)
        for c in json.load(open(os.path.join(ROOT, "bench", "configs", "known-misses.json"))):
            n = c["name"]
            mp = os.path.join(a.dir, n + ".measured.json")
            m = json.load(open(mp))["runs"][0]["measured"] if os.path.exists(mp) else committed[n]
            r = json.load(open(os.path.join(a.dir, n + ".dry.json")))["replays"][0]
            e = json.loads(subprocess.run([a.vl, "estimate"] + flags(c) + ["--format", "json"],
                                          capture_output=True, text=True).stdout)
            ma, mr = m["peak_allocated"], m["peak_reserved"]
            print("| %s | %.2f / %.2f | %+.1f %%, %+.1f %% | %+.1f %%, %+.1f %% |" % (
                n, ma / G, mr / G, pct(r["peak_allocated_bytes"], ma), pct(r["peak_reserved_bytes"], mr),
                pct(e["peak_allocated_bytes"], ma), pct(e["peak_reserved_bytes"], mr)))


    if __name__ == "__main__":
        main()


MODES = {"estimate": mode_estimate, "known-misses": mode_known_misses}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
