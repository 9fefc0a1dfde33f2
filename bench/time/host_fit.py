#!/usr/bin/env python3
"""Host seconds per op the step-time model enumerates, and per step: the
tiny models' measured steps (bench/time/run.sh --host: no kernel long enough to
hide the host) against the ops `vramledger estimate` counts for them
(time.eager_ops), a line through them by Theil-Sen (the median of the
pairwise slopes; robust to the odd model whose Python costs more).

  python3 bench/time/host_fit.py VRAMLEDGER HOST.json
  python3 bench/time/host_fit.py --write-configs

The tiny models' configs are the "config" of each line of
bench/configs/host.jsonl; the runs name them by the path in "model"
(bench/configs/host/tiny-NAME.json, not tracked), which write_configs()
writes from those lines where it is missing: run.sh --host before it measures,
this fit before it estimates, trace_compare.py before it traces.

By its first argument, also:

  traces: host seconds per traced ATen op, the same fit over the ops
    `vramledger trace` counts (mode_traces says how).
  isolated: host seconds per traced ATen op from full-size runs each in a
    process of its own (mode_isolated says how; steptrace.c's constant).
  tables: lib/model/kernel_tables.h again from the measured kernel tables
    and this fit (python3 bench/time/host_fit.py tables [VRAMLEDGER]).
"""
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl

HOST_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "host.jsonl")


def write_configs(jsonl=HOST_CONFIGS):
    """write each line's "config" to its "model" path (relative to the
    repository's root) where that file is missing"""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    for line in open(jsonl):
        r = json.loads(line) if line.strip() else {}
        p = os.path.join(root, r.get("model", ""))
        if "config" in r and not os.path.exists(p):
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                json.dump(r["config"], f, indent=1)


def main():
    if sys.argv[1:] == ["--write-configs"]:
        write_configs()
        return
    exe, path = sys.argv[1], sys.argv[2]
    write_configs()
    ratios, xs, ys = [], [], []
    for r in json.loads(text_of(path))["runs"]:
        m = (r.get("measured") or {}).get("step_median_s")
        if not m:
            continue
        f = ["--model", r["model"], "--batch", str(r["batch"]), "--seq", str(r["seq"]), "--precision", r["precision"],
             "--optimizer", r["optimizer"], "--attention", r["attention"], "--checkpointing", r["checkpointing"]]
        if r.get("lora"):
            f += ["--lora-rank", str(r["lora"])]
        d = json.loads(subprocess.run([exe, "estimate", *f, "--gpu", "h100-80gb", "--format", "json"],
                                      capture_output=True, text=True, check=True).stdout)
        ops = d["time"]["eager_ops"]
        ratios.append(m / ops)
        xs.append(ops)
        ys.append(m)
        print("%-34s %.4f s %6d ops %.2f us/op" % (r["name"], m, ops, 1e6 * m / ops))
    print("median %.3g s an op over %d runs (min %.3g, max %.3g)" % (statistics.median(ratios), len(ratios),
          min(ratios), max(ratios)))
    n = len(xs)
    slope = statistics.median([(ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n)
                               if xs[j] != xs[i]])
    step = statistics.median([y - slope * x for x, y in zip(xs, ys)])
    print("Theil-Sen: %.4g s an op, %.4g s a step" % (slope, step))


def mode_traces():
    """Host seconds per traced ATen op: the tiny models' measured steps
    (bench/time/run.sh --host: no kernel long enough to hide the host) against the
    ops `vramledger trace` counts for the same jobs, a line through them by
    Theil-Sen (as host_fit.py fits estimate's own op count). The ops are those
    dispatched in the passes priced op by op (forward, backward, between
    backward and optimizer.step), a recomputed op at 15.9 / 8.6 of one
    (lib/decide/steptime.c RECOMPUTE_HOST); views and empty tensors counted
    with the rest, then without (kernels only), for the two lines.

      python3 bench/time/host_fit.py traces VRAMLEDGER HOST.json TRACES_DIR
    (TRACES_DIR: bench/time/trace_compare.py --traces of the same runs)"""

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


def host_bound_traces(text):
    """the host-bound rows of bench/time/trace_compare.py --raw output
    (priced device time under 0.4 of the measured step), each with its
    host seconds an op: the measured step less the optimizer's phase over
    the traced ops"""
    for line in text.splitlines():
        r = json.loads(line) if line.strip() else {}
        if not r.get("trace_s") or not r.get("ops"):
            continue
        device = sum(v for k, v in r["kind_seconds"].items() if k != "host")
        if device < 0.4 * r["measured_s"]:
            opt = r["phase_seconds"]["optimizer"]
            yield {"name": r["name"], "measured_s": r["measured_s"], "device_s": round(device, 6),
                   "optimizer_s": opt, "ops": r["ops"],
                   "us_an_op": round(1e6 * (r["measured_s"] - opt) / r["ops"], 2)}


def mode_isolated():
    """Host seconds per traced ATen op from full-size runs each measured in
    a process of its own, as a user's job runs (bench/reserved/run.sh), not
    from the tiny models, whose calls cost more (mode_traces; full-size jobs
    run alone were no faster than in one process: bench/results/step-time/
    README.md, "One process a job"). Each row
    of bench/time/trace_compare.py --raw whose priced device time is under
    0.4 of its measured step is host-bound: its host seconds an op are the
    measured step less the optimizer's phase (its row and the step's fixed
    host cost) over the traced ops; the median of those rows over every
    file given (both cards' hosts) is the constant (steptrace.c
    TRACE_HOST_OP).

      python3 bench/time/host_fit.py isolated RAW.jsonl...
    (bench/results/step-time/trace/isolated-h100.jsonl, isolated-h200.jsonl)"""
    per = []
    for path in sys.argv[1:]:
        for r in host_bound_traces(text_of(path)):
            per.append(r["us_an_op"])
            print("%-44s %.4f s measured, %.4f s on the device, %6d ops: %.1f us an op" % (
                r["name"], r["measured_s"], r["device_s"], r["ops"], r["us_an_op"]))
    print("median %.3g s an op over %d host-bound runs (%.1f-%.1f us)" % (
        1e-6 * statistics.median(per), len(per), min(per), max(per)))


# The measured sets whose jobs each ran in a process of its own (bench/reserved/run.sh
# or measure.py --config, one job a process), by the card whose machine ran them
HOST_SETS = [
    ("h100-80gb", "bench/results/reserved/h100/reserved.json"),
    ("h100-80gb", "bench/results/reserved/h100/vision-seq2seq.json"),
    ("h100-80gb", "bench/results/reserved/moe-lora/moe-lora.json"),
    ("h100-80gb", "bench/results/reserved/breadth/breadth.json"),
    ("h100-80gb", "bench/results/reserved/new-types/new-types.json"),
    ("h100-80gb", "data/reference/h100-torch-2.11/retimed-measured.json"),
    ("h200", "bench/results/reserved/lora-seq2seq-h200/lora-seq2seq.json"),
    ("h200", "data/reference/h200-torch-2.11/calibration-isolated.json"),
    ("h200", "data/reference/h200-torch-2.11/types-measured.json"),
    ("h200", "data/reference/h200-torch-2.11/types-unseen-measured.json"),
    ("h200", "data/reference/h200-torch-2.11/unseen-measured.json"),
    ("h200", "data/reference/h200-torch-2.11/other-measured.json"),
    ("h200", "data/reference/h200-torch-2.11/calibration.json"),
] + [("h100-80gb", "bench/results/step-time/h100-%s/steps.json" % x) for x in "abcde"] + [
    ("h200", "bench/results/step-time/h200/steps.json"), ("h200", "bench/results/step-time/h200-b/steps.json")]
# the traced jobs of those sets (bench/results/step-time/trace/README.md)
TRACE_SETS = [("h100-80gb", "bench/results/step-time/trace/isolated-h100.jsonl"),
              ("h200", "bench/results/step-time/trace/isolated-h200.jsonl")]
HOSTS_OUT = "bench/results/step-time/hosts.json"


def mode_hosts():
    """Host seconds an op, set by set and card by card: the jobs of
    HOST_SETS (full size; a run timed while its host traced other jobs,
    `host_shared`, left out) whose estimated device time is under 0.4 of
    the measured step are host-bound; each gives the measured step less
    estimate's optimizer phase (its row and the step's fixed host cost) over
    estimate's host ops (time.host_seconds / VL_KT_HOST_OP: the ops it
    enumerates, a recomputed one at RECOMPUTE_HOST); the same over
    TRACE_SETS' rows with the ATen ops `vramledger trace` counted
    (mode_isolated's rows). Writes HOSTS_OUT: every row, the median of
    each set (a set is one lease's machine), of each card and of all
    (packed into the folder's raw.jsonl: bench/raw.py pack).

      python3 bench/time/host_fit.py hosts VRAMLEDGER"""
    import re
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare import flags  # noqa: E402
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    exe = os.path.abspath(sys.argv[1])
    tables = open(os.path.join(root, "lib/model/kernel_tables.h")).read()
    host_op = float(re.search(r"#define VL_KT_HOST_OP (\S+)", tables).group(1))
    rows = []
    for card, path in HOST_SETS:
        d = json.loads(text_of(os.path.join(root, path)))
        for r in d["runs"] if isinstance(d, dict) else d:
            m = r.get("measured") or {}
            meas = m.get("step_median_s") or m.get("step_s")
            if r.get("task", "train") != "train" or not meas or r.get("error") or r.get("host_shared"):
                continue
            here = os.path.join(root, os.path.dirname(path))  # a packed set's folder may not exist
            p = subprocess.run([exe, "estimate", *flags(r), "--gpu", card, "--format", "json"],
                               capture_output=True, text=True, cwd=here if os.path.isdir(here) else root)
            if p.returncode:
                continue
            e = json.loads(p.stdout)
            t, opt = e["time"], e["phase_seconds"]["optimizer"]
            ops = t["host_seconds"] / host_op
            if t["gpu_seconds"] - opt < 0.4 * (meas - opt):
                rows.append({"card": card, "set": path, "name": r["name"], "measured_s": meas,
                             "device_s": round(t["gpu_seconds"] - opt, 6), "optimizer_s": opt,
                             "ops": round(ops, 1), "us_an_op": round(1e6 * (meas - opt) / ops, 2)})
    aten = []
    for card, path in TRACE_SETS:
        aten += [dict(r, card=card, set=path) for r in host_bound_traces(text_of(os.path.join(root, path)))]

    def medians(rs):
        by = {}
        for x in rs:
            by.setdefault(x["card"], {}).setdefault(x["set"], []).append(x["us_an_op"])
        return {"all": round(statistics.median(x["us_an_op"] for x in rs), 2),
                "by_card": {c: round(statistics.median(v for vs in sets.values() for v in vs), 2)
                            for c, sets in by.items()},
                "by_set": {k: {"runs": len(v), "median": round(statistics.median(v), 2)}
                           for sets in by.values() for k, v in sets.items()}}
    res = {"method": "bench/time/host_fit.py hosts: host-bound jobs (estimated device time under 0.4 of "
                     "the measured step); (measured step - optimizer phase) / host ops, us an op",
           "estimate_host_op_us": 1e6 * host_op, "estimate": medians(rows), "trace": medians(aten),
           "estimate_rows": rows, "trace_rows": aten}
    with open(os.path.join(root, HOSTS_OUT), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    for k in ("estimate", "trace"):
        print(k, json.dumps({x: res[k][x] for x in ("all", "by_card")}))
        for sname, v in res[k]["by_set"].items():
            print("   %-58s %2d runs, median %.1f us an op" % (sname, v["runs"], v["median"]))


def mode_tables():
    """Regenerate lib/model/kernel_tables.h from the measured datasets
    (data/reference/*/kernels.json, attention.json) and the host fit:
    distill.py's tables with this fit's host seconds an op and a step,
    clang-formatted.

      python3 bench/time/host_fit.py tables [VRAMLEDGER]   (default build/vramledger)"""
    import re
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    exe = sys.argv[1] if len(sys.argv) > 1 else "build/vramledger"
    fit = subprocess.run([sys.executable, "bench/time/host_fit.py", exe,
                          "bench/results/step-time/h200/host/host.json"],
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    op, step = re.match(r"Theil-Sen: (\S+) s an op, (\S+) s a step", fit).groups()
    with open("lib/model/kernel_tables.h", "w") as f:
        subprocess.run([sys.executable, "bench/time/distill.py", op, step,
                        "h100-80gb=data/reference/h100-torch-2.11/kernels.json"
                        "+data/reference/h100-torch-2.11/attention.json",
                        "h200=data/reference/h200-torch-2.11/kernels.json"], stdout=f, check=True)
    print("lib/model/kernel_tables.h: host %s s an op, %s s a step" % (op, step))
    subprocess.run(["clang-format", "-i", "lib/model/kernel_tables.h"], check=True)


MODES = {"traces": mode_traces, "isolated": mode_isolated, "hosts": mode_hosts, "tables": mode_tables}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
