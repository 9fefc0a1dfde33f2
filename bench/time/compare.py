#!/usr/bin/env python3
"""Predicted against measured step time: `vramledger estimate --gpu CARD
--format json`'s step_seconds for each training run of measure.py result
files (step_median_s where the run timed several steps, else step_s).

  python3 bench/time/compare.py VRAMLEDGER CARD RESULTS.json... [--md]

Prints one row a run and the summary (median and worst |error|, how many
within 10 % and 25 %), and the same for the constant-MFU rule the planner
used before (6ND, 4ND with LoRA, +2ND recomputed, over the card's dense
16-bit peak x 0.40) beside it.

By its first argument, also:

  readme: Regenerate the tables of bench/results/step-time/README.md (the
    summary rows and the per-run tables) from compare.py's output.
"""
import json, os, statistics, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from raw import text_of  # noqa: E402  a results file, or its line of its folder's raw.jsonl

def vision(model):
    """a ViT's or a CNN's config: its side is --image-size, not --seq"""
    path = model if model.endswith(".json") else os.path.join("data", "models", model + ".json")
    try:
        return json.load(open(path)).get("model_type") in ("vit", "resnet")
    except (OSError, ValueError):
        return False


def flags(r):
    """estimate's flags for measure.py run r (trace_compare.py takes them too)"""
    side = ["--image-size", str(r.get("image_size") or r["seq"])] if vision(r["model"]) else \
        ["--seq", str(r["seq"])]
    if r.get("target_seq"):
        side += ["--target-seq", str(r["target_seq"])]
    f = ["--model", r["model"], "--batch", str(r["batch"])] + side + [
         "--precision", r["precision"], "--optimizer", r["optimizer"],
         "--optimizer-impl", r.get("optimizer_impl") or "foreach", "--attention", r["attention"],
         "--checkpointing", r["checkpointing"], "--grad-accum", str(r.get("grad_accum", 1))]
    if r.get("lora"):
        f += ["--lora-rank", str(r["lora"])]
        if r.get("lora_targets"):
            f += ["--lora-targets", r["lora_targets"]]
    return f



def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--md" in sys.argv
    exe, card, files = args[0], args[1], args[2:]
    rows = []
    for path in files:
        d = json.loads(text_of(path))
        for r in d["runs"]:
            m = r.get("measured") or {}
            meas = m.get("step_median_s") or m.get("step_s")
            if r.get("task", "train") != "train" or not meas or r.get("error"):
                continue
            if r.get("host_shared"):  # timed beside other work on its host: as validate, not compared
                continue
            if r["model"].endswith(".json"):  # from the results file's folder, as validate reads it
                here = os.path.normpath(os.path.join(os.path.dirname(path), r["model"]))
                r = dict(r, model=here if os.path.exists(here) else r["model"])
                if not os.path.exists(r["model"]):
                    continue
            p = subprocess.run([exe, "estimate", *flags(r), "--gpu", card, "--margin", "0", "--format", "json"],
                               capture_output=True, text=True)
            try:
                d = json.loads(p.stdout)
                est = d["step_seconds"]
            except (ValueError, KeyError):
                rows.append((r["name"], meas, None, p.stderr.strip().splitlines()[-1:] or ["?"], None))
                continue
            f = (4 if r.get("lora") else 6) + (2 if r["checkpointing"] == "full" else 0)
            peak = 989.4e12  # the H100's and the H200's dense bf16, the rule's peak
            mfu_s = f * d["time"]["model_flops"] / (4 if r.get("lora") else 6) / peak / 0.40
            rows.append((r["name"], meas, est, None, mfu_s))
    errs, olds = [], []
    if md:
        print("| run | measured s | predicted s | error | constant MFU 0.40 s | error |\n|---|---:|---:|---:|---:|---:|")
    for name, meas, est, why, mfu_s in rows:
        if est is None:
            print(("| %s | %.4f | - | %s | | |" if md else "%-48s %8.4f  -  %s") % (name, meas, why[0]))
            continue
        err, old = est / meas - 1, mfu_s / meas - 1
        errs.append(abs(err))
        olds.append(abs(old))
        print(("| %s | %.4f | %.4f | %+.1f %% | %.4f | %+.1f %% |" if md else "%-48s %8.4f %8.4f %+6.1f %% %8.4f %+6.1f %%")
              % (name, meas, est, 100 * err, mfu_s, 100 * old))


    def summary(what, e):
        n = len(e)
        return ("%s: |error| median %.1f %%, worst %.1f %%; %d/%d within 10 %%, %d/%d within 25 %%"
                % (what, 100 * statistics.median(e), 100 * max(e), sum(x <= 0.10 for x in e), n,
                   sum(x <= 0.25 for x in e), n))


    if errs:
        print("\n%d runs on %s" % (len(errs), card))
        print(summary("priced kernel by kernel", errs))
        print(summary("constant MFU 0.40", olds))


# the result files of 231 H200 training runs measured before the step-time
# model existed (single step after two warm-ups): the summary's "earlier" row
EARLIER_H200 = [
    "data/reference/h200-torch-2.11/unseen-measured.json",
    "data/reference/h200-torch-2.11/other-measured.json",
    "data/reference/h200-torch-2.11/calibration.json",
    "data/reference/h200-torch-2.11/types-measured.json",
    "data/reference/h200-torch-2.11/types-unseen-measured.json",
]


def mode_readme():
    """Regenerate the tables of bench/results/step-time/README.md (the summary
    rows and the per-run tables) from compare.py's output.

      python3 bench/time/compare.py readme VRAMLEDGER"""
    import re, subprocess, sys

    exe = sys.argv[1]
    here = "bench/results/step-time/"


    def run(card, *files, md=True):
        return subprocess.run([sys.executable, "bench/time/compare.py", exe, card, *files] + (["--md"] if md else []),
                              capture_output=True, text=True, check=True).stdout


    h100 = run("h100-80gb", here + "h100-a/steps.json")
    h200 = run("h200", here + "h200/steps.json")
    earlier = run("h200", *EARLIER_H200, md=False)
    # the same suite on the H100 again: the same lease (b), a later lease twice (c, d), a third (e)
    again = [("H100 (%s)" % x, run("h100-80gb", here + "h100-%s/steps.json" % x, md=False), "time.jsonl")
             for x in "bcde"]
    # the H200 again, a later lease (b)
    h200b = run("h200", here + "h200-b/steps.json", md=False)
    rows = []
    for card, t, setname in [("H100 (a)", h100, "time.jsonl")] + again + [
            ("H200", h200, "time.jsonl"), ("H200 (b)", h200b, "time.jsonl"), ("H200", earlier, "earlier")]:
        n = re.search(r"(\d+) runs on", t).group(1)
        a = re.search(r"priced kernel by kernel: \|error\| median ([\d.]+) %, worst ([\d.]+) %; (\d+)/\d+ within 10 %, "
                      r"(\d+)/\d+ within 25 %", t)
        b = re.search(r"constant MFU 0.40: \|error\| median ([\d.]+) %, worst ([\d.]+) %", t)
        rows.append("| %s | %s | %s | %s %% | %s %% | %s | %s | %s %%, %s %% |" % (setname, card, n, *a.groups(), *b.groups()))
        print(rows[-1])
    p = here + "README.md"
    s = open(p).read()
    head = "|---|---|---:|---:|---:|---:|---:|---|\n"
    i = s.index(head) + len(head)
    s = s[:i] + "\n".join(rows) + s[s.index("\n\n", i):]
    k = s.index("## H100\n\n") + len("## H100\n\n")
    s = s[:k] + h100[:h100.index("\n\n")] + s[s.index("\n\n## H200"):]
    k = s.index("## H200\n\n") + len("## H200\n\n")
    s = s[:k] + h200[:h200.index("\n\n")] + "\n"
    open(p, "w").write(s)


MODES = {"readme": mode_readme}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
