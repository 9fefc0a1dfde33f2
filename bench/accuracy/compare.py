#!/usr/bin/env python3
"""Estimate vs measured, from a python/vramledger/measure.py result: runs
`vramledger estimate --format json` for every run and prints a Markdown table
(peak allocated, reserved, process total against NVML), the phase peaks with
--phases, and the error summary, calibration and hold-out sets apart.

    python3 bench/accuracy/compare.py build/vramledger bench/results/<file>.json [--phases]

By its first argument, also:

  types-table: README's table of the model types against the H200: for every
    run of the types suite (set "suite", or "hold-out" where the run is held
    out) and of the other shapes written down before they were measured
    ("unseen"), peak allocated and the process total, estimated and measured,
    from `vramledger validate --results FILE --format json`. A run validate
    does not compare (T5's generate()) is left out. Prints the Markdown rows,
    indented for the README's list item.
  callbacks: Compare the metrics bench/gpu/jobs/workloads.py callbacks
    logged with the run's record: each logged step's peak allocated/reserved
    is the record's `step` event's; one JSON line
    (compare.py callbacks LOGGED.json RECORD.jsonl).
  shapes: formula vs dry run for the encoder-decoder and vision shapes of
    bench/configs/vision-seq2seq.jsonl (bench/results/shapes-vision-seq2seq/).
"""
import json, subprocess, sys

G = 2 ** 30


def estimate_args(r):
    a = ["estimate", "--model", r["model"], "--batch", str(r["batch"]), "--seq", str(r["seq"]),
         "--precision", r["precision"], "--attention", r["attention"], "--format", "json"]
    if r["task"] == "infer":
        return a + ["--task", "infer", "--new-tokens", str(r["new_tokens"])]
    a += ["--optimizer", r["optimizer"], "--optimizer-impl", r["optimizer_impl"],
          "--checkpointing", r["checkpointing"]]
    if r["precision"].startswith("mixed-"):
        a += ["--master-grads", "fp32"]
    if r.get("lora"):
        a += ["--lora-rank", str(r["lora"]), "--lora-targets", r.get("lora_targets") or "q_proj,v_proj"]
    return a


def pct(est, meas):
    return None if not meas else 100.0 * (est - meas) / meas


def fmt(p):
    return "n/a" if p is None else f"{p:+.1f} %"


def main():
    vl, path = sys.argv[1], sys.argv[2]
    phases = "--phases" in sys.argv
    data = json.load(open(path))
    print(f"Measured on {data['device']} (driver {data.get('driver')}, torch {data['torch']}, CUDA "
          f"{data['cuda']}, transformers {data['transformers']}, peft {data.get('peft')}), "
          f"{data['date'][:10]}; source: `{path}`. Estimates: `vramledger {' '.join(['estimate', '...'])}`"
          f" as `bench/accuracy/compare.py` runs it.\n")
    head = "| run | set | peak allocated est / meas GiB | err | reserved est / meas | err | process est / NVML | err |"
    if phases:
        head += " fwd err | bwd err | opt err |"
    print(head)
    print("|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if phases else ""))
    errs = {"calibration": [], "holdout": []}
    tot = {"calibration": [], "holdout": []}
    for r in data["runs"]:
        s = "holdout" if r.get("holdout") else "calibration"
        if "measured" not in r:
            print(f"| {r['name']} | {s} | not measured: {r.get('error', '')[:50]} |||||||")
            continue
        out = subprocess.run([vl] + estimate_args(r), capture_output=True, text=True)
        if out.returncode not in (0, 3):
            print(f"| {r['name']} | {s} | estimate failed: {out.stderr.strip()[:60]} |||||||")
            continue
        e, m = json.loads(out.stdout), r["measured"]
        pa, pr, nv = m["peak_allocated"], m["peak_reserved"], m.get("nvml_process")
        ea, er, et = e["peak_allocated_bytes"], e["peak_reserved_bytes"], e["total_bytes"]
        errs[s].append(abs(pct(ea, pa)))
        if nv:
            tot[s].append(abs(pct(et, nv)))
        row = (f"| {r['name']} | {s} | {ea / G:.2f} / {pa / G:.2f} | {fmt(pct(ea, pa))} | {er / G:.2f} / "
               f"{pr / G:.2f} | {fmt(pct(er, pr))} | {et / G:.2f} / {(nv or 0) / G:.2f} | {fmt(pct(et, nv))} |")
        if phases and r["task"] == "train":
            pp = e["phase_peaks_allocated_bytes"]
            row += (f" {fmt(pct(pp['forward'], m['peak_forward']))} | {fmt(pct(pp['backward'], m['peak_backward']))}"
                    f" | {fmt(pct(pp['optimizer step'], m['peak_optimizer']))} |")
        elif phases:
            row += " | | |"
        print(row)
    print()
    for s in ("calibration", "holdout"):
        v = sorted(errs[s])
        t = sorted(tot[s])
        if v:
            print(f"- {s}: {len(v)} runs; peak allocated |error| median {v[len(v) // 2]:.1f} %, max {v[-1]:.1f} %, "
                  f"within 5 %: {sum(x <= 5 for x in v)}/{len(v)}; process total vs NVML |error| median "
                  f"{t[len(t) // 2]:.1f} %, max {t[-1]:.1f} %, within 7 %: {sum(x <= 7 for x in t)}/{len(t)}")


def mode_types_table():
    """README's table of the model types against the H200: for every run of the
    types suite (set "suite", or "hold-out" where the run is held out) and of
    the other shapes written down before they were measured ("unseen"), peak
    allocated and the process total, estimated and measured, from `vramledger
    validate --results FILE --format json`. A run validate does not compare
    (T5's generate()) is left out. Prints the Markdown rows, indented for the
    README's list item.

      python3 bench/accuracy/compare.py types-table VRAMLEDGER SUITE.json UNSEEN.json"""
    import json
    import subprocess
    import sys

    GIB = float(1 << 30)


    def runs(vl, path):
        p = subprocess.run([vl, "validate", "--results", path, "--format", "json"],
                           capture_output=True, text=True)
        if p.returncode not in (0, 3):
            sys.exit("%s: validate exited %d: %s" % (path, p.returncode, p.stderr.strip()))
        return json.loads(p.stdout)["runs"]


    def main():
        vl, suite, unseen = sys.argv[1:4]
        print("  | run | set | peak allocated GiB, est. / measured | error | process GiB, est. / NVML | error |")
        print("  |---|---|---|---|---|---|")
        for path, kind in ((suite, "suite"), (unseen, "unseen")):
            for r in runs(vl, path):
                if not r.get("compared"):
                    continue
                s = kind if kind == "unseen" else ("hold-out" if r["holdout"] else "suite")
                print("  | %s | %s | %.2f / %.2f | %+.1f %% | %.2f / %.2f | %+.1f %% |" % (
                    r["name"], s, r["estimate_allocated_bytes"] / GIB, r["measured_allocated_bytes"] / GIB,
                    r["error_allocated_pct"], r["estimate_total_bytes"] / GIB, r["nvml_process_bytes"] / GIB,
                    r["error_total_pct"]))


    if __name__ == "__main__":
        main()


def mode_callbacks():
    """Compare the metrics bench/gpu/jobs/workloads.py callbacks logged with the run's record:
    each logged step's peak allocated/reserved is the record's `step` event's.
      python3 bench/accuracy/compare.py callbacks LOGGED.json RECORD.jsonl  -> one JSON line"""
    import json
    import sys

    GIB = float(1 << 30)
    logged = json.load(open(sys.argv[1]))
    steps = [e for e in map(json.loads, open(sys.argv[2])) if e.get("type") == "step"]
    rows = []
    for (step, m), ev in zip(logged, steps):
        rows.append({"logged_step": step, "probe_step": ev["step"],
                     "logged_peak_allocated": m.get("vramledger/peak_allocated_gib"),
                     "record_peak_allocated": ev.get("peak_allocated", 0) / GIB,
                     "logged_peak_reserved": m.get("vramledger/peak_reserved_gib"),
                     "record_peak_reserved": ev.get("peak_reserved", 0) / GIB,
                     "bill_parts": sorted(k[16:-4] for k in m if k.startswith("vramledger/bill/"))})
    same = all(r["logged_peak_allocated"] == r["record_peak_allocated"]
               and r["logged_peak_reserved"] == r["record_peak_reserved"] for r in rows)
    print(json.dumps({"logged": len(logged), "record_steps": len(steps), "equal": same and
                      len(logged) == len(steps), "rows": rows}))


def mode_shapes():
    """Formula vs dry run (meta tensors) for the shapes of
    bench/configs/vision-seq2seq.jsonl: encoder-decoders at --target-seq 32,
    128, 512 over a 512-token source, ResNet-50 and ViT-base at several
    --image-size. One dry run at a time; writes
    bench/results/shapes-vision-seq2seq/results.csv.

      python3 bench/accuracy/compare.py shapes [BUILD_DIR]"""
    import os
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    bin = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build", "vramledger")
    if not os.environ.get("VRAMLEDGER_PYTHON"):
        os.environ["VRAMLEDGER_PYTHON"] = subprocess.run(["scripts/pyenv.sh"], capture_output=True, text=True,
                                                         check=True).stdout.strip()
    out = open("bench/results/shapes-vision-seq2seq/results.csv", "w")
    out.write("name,formula_allocated,dry_run_allocated,allocated_pct,formula_reserved,dry_run_reserved,"
              "reserved_pct,approximate\n")
    for line in open("bench/configs/vision-seq2seq.jsonl"):
        c = json.loads(line)
        args = [bin, "estimate", "--model", c["model"], "--precision", c["precision"],
                "--optimizer", c["optimizer"], "--optimizer-impl", c["optimizer_impl"],
                "--attention", c["attention"], "--checkpointing", c["checkpointing"],
                "--batch", str(c["batch"])]
        if c.get("image_size"):
            args += ["--image-size", str(c["image_size"])]
        else:
            args += ["--seq", str(c["seq"])]
        if c.get("target_seq"):
            args += ["--target-seq", str(c["target_seq"])]
        p = subprocess.run(args + ["--dry-run", "--format", "json"], capture_output=True, text=True)
        if p.returncode != 0:
            out.write("%s,error,,,,,,\n" % c["name"])
            sys.stderr.write(p.stderr)
            continue
        d = json.loads(p.stdout)
        r = d["dry_run"]
        pct = r["formula_vs_dry_run_pct"]
        out.write("%s,%d,%d,%+.1f,%d,%d,%+.1f,%s\n" % (
            c["name"], d["peak_allocated_bytes"], r["peak_allocated_bytes"], pct["peak_allocated"],
            d["peak_reserved_bytes"], r["peak_reserved_bytes"], pct["peak_reserved"],
            "yes" if d.get("approximate") else "no"))
        out.flush()
    out.close()


MODES = {
    "types-table": mode_types_table,
    "callbacks": mode_callbacks,
    "shapes": mode_shapes,
}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
