#!/usr/bin/env python3
"""The bandwidth each memory-bound ATen op reaches in a whole training
step: the device time `bench/time/step_profile.py` measured for the op
(its `aten_top`: the 25 ops of the step with the most device time,
inclusive of the kernels they call) against the bytes `vramledger trace`
counts for the same op in the same step traced on meta tensors (its op
lines: inputs read and outputs written, numel x element size, every call
of the step but the optimizer's and what runs between steps).

  python3 bench/time/op_rates.py CARD=PROFILE.json TRACES_DIR [--md]

TRACES_DIR/NAME/run/alloc.trace: the trace of the profile's run NAME
(measure.py --config of the same configuration, --device meta). Prints a
row per op and run found in both: calls, GB, ms, TB/s, and the bandwidth
lib/model/kernel_tables.h prices its class at on that card; then the
median TB/s of each op over the runs of each card. An op whose calls in
the trace and in the profile differ (in-place sums the optimizer adds to,
kernels a meta run takes another way) is left out. Last, each run's `mul`
apart: its calls whose bytes are under 2.5 times their output's (one
operand broadcast, or a scalar) and the others (both operands full), the
full ones taken at the table's add bandwidth, the broadcast ones' rate
what is left of the profiled time (steptime.c BCAST_BPS).
"""
import collections, json, os, re, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl

PHASES = {"forward", "backward", "recompute", "prestep"}


def traced_bytes(path):
    """op name -> [bytes, calls, class] over one whole step (the second:
    the first allocates the optimizer's states)"""
    lines = [ln.split() for ln in open(path) if ln.startswith("# op ")]
    steps = sorted({int(x[2]) for x in lines})
    if not steps:
        return {}
    step = steps[1] if len(steps) > 1 else steps[0]
    by = collections.defaultdict(lambda: [0.0, 0.0, ""])
    for x in lines:
        if int(x[2]) != step or x[3] not in PHASES or x[5] != "mem":
            continue
        kv = dict(w.split("=", 1) for w in x[7:] if "=" in w)
        if kv.get("inner"):
            continue
        n = float(x[4])
        by[x[6]][0] += n * float(kv["bytes"])
        by[x[6]][1] += n
        by[x[6]][2] = kv.get("class", "ew")
    return by


ELEMENT = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


def mul_split(path):
    """one step's `mul` bytes: (broadcast or scalar, both operands full)"""
    lines = [ln.split() for ln in open(path) if ln.startswith("# op ")]
    steps = sorted({int(x[2]) for x in lines})
    step = steps[1] if len(steps) > 1 else steps[0]
    bc = full = 0.0
    for x in lines:
        if int(x[2]) != step or x[3] not in PHASES or x[5] != "mem" or x[6] != "mul":
            continue
        kv = dict(w.split("=", 1) for w in x[7:] if "=" in w)
        b = float(x[4]) * float(kv["bytes"])
        if float(kv["bytes"]) < 2.5 * float(kv["numel"]) * ELEMENT.get(kv["dtype"], 4):
            bc += b
        else:
            full += b
    return bc, full


def table_bandwidths(card):
    """the class bandwidths kernel_tables.h holds for card (bytes/s)"""
    h = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib", "model",
                          "kernel_tables.h")).read()
    i = h.index('{"%s",' % card)
    nums = re.findall(r"vl_kt_attn_\w+\[0\],\s*([\d.e+]+),\s*([\d.e+]+),\s*([\d.e+]+),\s*([\d.e+]+)", h[i:])[0]
    add, cast, norm, softmax = (float(x) for x in nums)
    return {"ew": add, "cast": cast, "norm": norm, "softmax": softmax, "loss": softmax}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--md" in sys.argv
    traces = args[-1]
    rows, per, splits = [], collections.defaultdict(list), []
    for spec in args[:-1]:
        card, path = spec.split("=", 1)
        bw = table_bandwidths(card)
        for r in json.loads(text_of(path)):
            t = os.path.join(traces, r["name"], "run", "alloc.trace")
            if not os.path.exists(t) or "aten_top" not in r:
                continue
            by = traced_bytes(t)
            prof = {k[len("aten::"):]: dev for k, _, _, dev in r["aten_top"]}
            if "mul" in prof:
                bc, full = mul_split(t)
                left = prof["mul"] - full / bw["ew"]
                if left > 0:
                    splits.append((card, r["name"], bc, full, prof["mul"], bc / left))
            for key, cpu_s, calls, dev_s in r["aten_top"]:
                op = key[len("aten::"):] if key.startswith("aten::") else key
                if op not in by or dev_s <= 0:
                    continue
                b, n, cls = by[op]
                if n != calls:  # not the same calls (the optimizer's, a kernel meta runs otherwise)
                    continue
                rate = b / dev_s
                rows.append((card, r["name"], op, n, calls, b, dev_s, rate, bw.get(cls, bw["ew"]), cls))
                per[(card, op)].append(rate)
    fmt = "| %s | %s | %s | %d | %d | %.2f | %.2f | %.2f | %.2f (%s) |" if md else \
          "%-9s %-44s %-28s %5d %5d %8.2f GB %8.2f ms %5.2f TB/s  table %.2f (%s)"
    if md:
        print("| card | run | op | calls (trace) | calls (profile) | GB | ms | TB/s | table TB/s (class) |")
        print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for card, name, op, n, calls, b, dev_s, rate, tbw, cls in rows:
        print(fmt % (card, name, op, n, calls, b / 1e9, dev_s * 1e3, rate / 1e12, tbw / 1e12, cls))
    print()
    for (card, op), v in sorted(per.items()):
        if len(v) > 1:
            print("%s %-28s median %.2f TB/s over %d runs (%.2f-%.2f)" % (card, op, statistics.median(v) / 1e12,
                                                                         len(v), min(v) / 1e12, max(v) / 1e12))
    print()
    for card, name, bc, full, dev, rate in splits:
        print("%s %-44s mul %.1f ms: %.1f GB both full (at the add's), %.1f GB broadcast -> %.2f TB/s"
              % (card, name, dev * 1e3, full / 1e9, bc / 1e9, rate / 1e12))


if __name__ == "__main__":
    main()
