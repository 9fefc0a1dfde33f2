#!/usr/bin/env python3
"""Regenerate the tables of bench/results/step-time/README.md (the summary
rows and the per-run tables) from compare.py's output.

  python3 bench/time/results_readme.py VRAMLEDGER"""
import re, subprocess, sys

exe = sys.argv[1]
here = "bench/results/step-time/"


def run(card, *files, md=True):
    return subprocess.run([sys.executable, "bench/time/compare.py", exe, card, *files] + (["--md"] if md else []),
                          capture_output=True, text=True, check=True).stdout


h100 = run("h100-80gb", here + "h100-a/steps.json")
h200 = run("h200", here + "h200/steps.json")
earlier = run("h200", *open("bench/time/earlier-h200-runs.txt").read().split(), md=False)
rows = []
for card, t, setname in (("H100", h100, "time.jsonl"), ("H200", h200, "time.jsonl"), ("H200", earlier, "earlier")):
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
