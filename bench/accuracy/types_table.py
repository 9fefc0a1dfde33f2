#!/usr/bin/env python3
"""README's table of the model types against the H200: for every run of the
types suite (set "suite", or "hold-out" where the run is held out) and of
the other shapes written down before they were measured ("unseen"), peak
allocated and the process total, estimated and measured, from `vramledger
validate --results FILE --format json`. A run validate does not compare
(T5's generate()) is left out. Prints the Markdown rows, indented for the
README's list item.

  python3 bench/accuracy/types_table.py VRAMLEDGER SUITE.json UNSEEN.json
"""
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
