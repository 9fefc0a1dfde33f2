#!/usr/bin/env python3
"""Estimate vs measured: run `vramledger estimate --format json` for every
run recorded by bench/measure_train.py and print a Markdown table of peak
allocated, peak reserved and process total against the measurements, with
the relative error. Usage:

    python3 bench/compare_estimate.py build/vramledger bench/results/<run>.json
"""
import json, subprocess, sys


def estimate(vl, r):
    args = [vl, "estimate", "--model", r["model"], "--batch", str(r["batch"]), "--seq", str(r["seq"]),
            "--precision", r["precision"], "--attention", r["attention"], "--format", "json"]
    if r["task"] == "infer":
        args += ["--task", "infer", "--new-tokens", str(r["extra"]["new"])]
    else:
        args += ["--optimizer", r["optimizer"], "--optimizer-impl", r["optimizer_impl"],
                 "--checkpointing", r["checkpointing"]]
        if r["extra"].get("lora"):
            args += ["--lora-rank", str(r["extra"]["lora"]), "--lora-targets", "q_proj,v_proj"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 3):
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout)


def err(est, meas):
    return "n/a" if not meas else f"{100.0 * (est - meas) / meas:+.1f} %"


def main():
    vl, path = sys.argv[1], sys.argv[2]
    data = json.load(open(path))
    G = 2 ** 30
    print(f"Measured on {data['device']} (driver {data.get('driver')}, torch {data['torch']}, "
          f"CUDA {data['cuda']}, transformers {data['transformers']}), {data['date'][:10]}; "
          f"source: {path}\n")
    print("| run | peak alloc est / meas (GiB) | err | reserved est / meas | err | "
          "process est / NVML | err |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    errs = []
    for r in data["runs"]:
        if "measured" not in r:
            print(f"| {r['name']} | failed: {r.get('error', '')[:60]} | | | | | |")
            continue
        m, e = r["measured"], estimate(vl, r)
        pa, pr, nv = m["peak_allocated"], m["peak_reserved"], m.get("nvml_process")
        ea, er, et = e["peak_allocated_bytes"], e["peak_reserved_bytes"], e["total_bytes"]
        errs.append(abs(ea - pa) / pa)
        print(f"| {r['name']} | {ea / G:.2f} / {pa / G:.2f} | {err(ea, pa)} | {er / G:.2f} / {pr / G:.2f} "
              f"| {err(er, pr)} | {et / G:.2f} / {(nv or 0) / G:.2f} | {err(et, nv)} |")
    if errs:
        errs.sort()
        print(f"\npeak allocated: median |error| {100 * errs[len(errs) // 2]:.1f} %, "
              f"max {100 * errs[-1]:.1f} % over {len(errs)} runs")


if __name__ == "__main__":
    main()
