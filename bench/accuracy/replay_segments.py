#!/usr/bin/env python3
"""Segments the training replay takes against the allocator's own.

    cmake -S . -B /tmp/blog -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-DVL_PROG_LOG
    cmake --build /tmp/blog
    /tmp/blog/vramledger estimate ARGS... 2> replay.log > /dev/null
    python3 bench/accuracy/replay_segments.py HISTORY_DIR replay.log

HISTORY_DIR: a run of bench/gpu/jobs/alloc_history.py (its segments.json: every
segment the allocator took from the driver, the request that made it and
the bytes allocated before). replay.log: the developer build's stderr,
whose `# segment SIZE for REQUEST allocated BEFORE` lines (lib/model/prog.h)
are the replay's. Prints both totals, the sizes whose counts differ, then
the two lists side by side, the real one with the Python line of each.
"""
import collections
import json
import os
import sys

MiB = 2 ** 20


def real_segments(d):
    with open(os.path.join(d, "segments.json")) as f:
        return [(s["size"], s["request"], s["allocated_before"], (s.get("frames") or [""])[0])
                for s in json.load(f) if "size" in s]


def replay_segments(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("# segment "):
                w = line.split()
                out.append((int(w[2]), int(w[4]), int(w[6]), ""))
    return out


def main():
    real, rep = real_segments(sys.argv[1]), replay_segments(sys.argv[2])
    print("real %d segments, %.0f MiB; replay %d segments, %.0f MiB" % (
        len(real), sum(s[0] for s in real) / MiB, len(rep), sum(s[0] for s in rep) / MiB))
    rc = collections.Counter(s[0] for s in real)
    pc = collections.Counter(s[0] for s in rep)
    for size in sorted(set(rc) | set(pc)):
        if rc[size] != pc[size]:
            print("  %8.1f MiB: real %4d, replay %4d" % (size / MiB, rc[size], pc[size]))
    print("\n%8s %8s %9s %-40s | %8s %8s %9s" % ("size", "request", "alloc'd", "where (real)",
                                                 "size", "request", "alloc'd"))
    for i in range(max(len(real), len(rep))):
        a = real[i] if i < len(real) else None
        b = rep[i] if i < len(rep) else None
        left = ("%8.1f %8.1f %9.1f %-40s" % (a[0] / MiB, a[1] / MiB, a[2] / MiB, a[3][:40])
                if a else " " * 68)
        right = "%8.1f %8.1f %9.1f" % (b[0] / MiB, b[1] / MiB, b[2] / MiB) if b else ""
        print(left, "|", right)


if __name__ == "__main__":
    main()
