#!/usr/bin/env python3
"""The traced step's time against the measured one: each training run of
measure.py result files is traced on meta tensors (on the CPU where it
needs autocast: meta has none) with the same script and configuration
(python/vramledger/measure.py --config, 3 steps), and `vramledger trace
--gpu CARD --format json`'s step_seconds compared with the run's measured
step (step_median_s) and with `vramledger estimate --gpu CARD`'s
prediction for the same configuration.

  python3 bench/time/trace_compare.py VRAMLEDGER CARD RESULTS.json [--names=A,B,...]
          [--traces=DIR] [--raw=OUT.jsonl] [--md]

--traces=DIR keeps each run's trace (NAME.trace) and replays one already
there instead of tracing again (another card, a changed model).

$VRAMLEDGER_PYTHON is the Python that runs measure.py (with torch,
transformers, peft). Prints one row a run and the summary: median and
worst |error| of the traced step and of estimate's against the measured
step, and of the traced against estimate's."""
import json, os, shutil, statistics, subprocess, sys, tempfile

args = [a for a in sys.argv[1:] if not a.startswith("--")]
opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
exe, card, files = args[0], args[1], args[2:]
names = set(opts["names"].split(",")) if "names" in opts else None
py = os.environ.get("VRAMLEDGER_PYTHON", "python3")
here = os.path.dirname(os.path.abspath(__file__))
measure = os.path.join(here, "..", "..", "python", "vramledger", "measure.py")
sys.path.insert(0, here)
from compare import flags as estimate_flags  # noqa: E402  (estimate's flags, as compare.py gives them)
from compare import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl
from host_fit import write_configs  # noqa: E402  the tiny models' configs (bench/configs/host.jsonl)
FIELDS = ("model", "precision", "optimizer", "optimizer_impl", "attention", "checkpointing", "batch", "seq",
          "grad_accum", "lora", "lora_targets", "target_seq", "image_size")


def traced(r):
    """trace's JSON for run r, or (None, why); with --traces=DIR the trace
    is kept there as NAME.trace, and one found there is replayed instead
    of traced again"""
    keep = os.path.join(opts["traces"], r["name"] + ".trace") if "traces" in opts else None
    if keep and os.path.exists(keep):
        p = subprocess.run([exe, "trace", "--replay", keep, "--gpu", card, "--format", "json"],
                           capture_output=True, text=True)
        try:
            t = json.loads(p.stdout)
            dev = t.get("device")  # the allocations replayed: meta, or every device (a CPU dry run)
            return t, "cpu" if dev == "all" else dev
        except ValueError:
            return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    conf = {k: r[k] for k in FIELDS if r.get(k) is not None}
    conf["time_steps"] = 0
    dev = "cpu" if r["precision"].startswith("amp") else "meta"
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([exe, "trace", "--gpu", card, "--format", "json", "--out", os.path.join(d, "run"), "--",
                            py, measure, os.path.join(d, "out.json"), "--in-process", "--device", dev,
                            "--config", json.dumps(conf)], capture_output=True, text=True, timeout=1800)
        if keep and os.path.exists(os.path.join(d, "run", "alloc.trace")):
            os.makedirs(opts["traces"], exist_ok=True)
            shutil.copyfile(os.path.join(d, "run", "alloc.trace"), keep)
        try:
            return json.loads(p.stdout), dev
        except ValueError:
            return None, (p.stderr.strip().splitlines() or ["?"])[-1]


def estimated(r):
    p = subprocess.run([exe, "estimate", *estimate_flags(r), "--gpu", card, "--margin", "0", "--format", "json"],
                       capture_output=True, text=True)
    try:
        return json.loads(p.stdout)["step_seconds"]
    except (ValueError, KeyError):
        return None


def main():
    write_configs()
    rows = []
    raw = open(opts["raw"], "a") if "raw" in opts else None
    for path in files:
        for r in json.loads(text_of(path))["runs"]:
            m = (r.get("measured") or {})
            meas = m.get("step_median_s") or m.get("step_s")
            if names is not None and r["name"] not in names:
                continue
            if r.get("task", "train") != "train" or not meas or r.get("error"):
                continue
            # a config path a results file holds relative to its own folder
            # (bench/results/reserved/h100/: ../../../configs/flan-t5-base.json)
            beside = os.path.join(os.path.dirname(path), r["model"])
            if r["model"].endswith(".json") and not os.path.exists(r["model"]) and os.path.exists(beside):
                r = dict(r, model=os.path.normpath(beside))
            t, dev = traced(r)
            est = estimated(r)
            row = {"name": r["name"], "measured_s": meas, "estimate_s": est, "device": dev,
                   "trace_s": t.get("step_seconds") if t else None, "why": None if t else dev}
            if t and t.get("time"):
                row.update({"phase_seconds": t["phase_seconds"], "kind_seconds": t["time"]["kind_seconds"],
                            "ops": t["time"]["eager_ops"], "kernels": t["time"]["kernels"],
                            "tokens_per_second": t["tokens_per_second"], "mfu": t["mfu"]})
            rows.append(row)
            if raw:
                raw.write(json.dumps(row) + "\n")
                raw.flush()
            print(json.dumps({k: row[k] for k in ("name", "measured_s", "trace_s", "estimate_s", "why")}),
                  file=sys.stderr, flush=True)
    md = "md" in opts
    if md:
        print("| run | measured s | trace s | error | estimate s | error | trace vs estimate |\n"
              "|---|---:|---:|---:|---:|---:|---:|")
    et, ee, te = [], [], []
    for r in rows:
        if r["trace_s"] is None:
            print(("| %s | %.4f | - | %s | | | |" if md else "%-44s %8.4f  -  %s") % (r["name"], r["measured_s"], r["why"]))
            continue
        a = r["trace_s"] / r["measured_s"] - 1
        b = r["estimate_s"] / r["measured_s"] - 1 if r["estimate_s"] else None
        c = r["trace_s"] / r["estimate_s"] - 1 if r["estimate_s"] else None
        et.append(abs(a))
        if b is not None:
            ee.append(abs(b))
            te.append(abs(c))
        fmt = "| %s | %.4f | %.4f | %+.1f %% | %s | %s | %s |" if md else "%-44s %8.4f %8.4f %+6.1f %% %8s %8s %8s"
        print(fmt % (r["name"], r["measured_s"], r["trace_s"], 100 * a,
                     "%.4f" % r["estimate_s"] if r["estimate_s"] else "-",
                     "%+.1f %%" % (100 * b) if b is not None else "-",
                     "%+.1f %%" % (100 * c) if c is not None else "-"))
    for label, e in (("trace vs measured", et), ("estimate vs measured", ee), ("trace vs estimate", te)):
        if e:
            print("%s%s: %d runs, median |error| %.1f %%, worst %.1f %%" %
                  ("\n" if md and label.startswith("trace vs m") else "", label, len(e),
                   100 * statistics.median(e), 100 * max(e)))


if __name__ == "__main__":
    main()
