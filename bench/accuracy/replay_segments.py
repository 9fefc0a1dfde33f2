#!/usr/bin/env python3
"""Segments the training replay takes against the allocator's own.

    cmake -S . -B /tmp/blog -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-DVL_PROG_LOG
    cmake --build /tmp/blog
    /tmp/blog/vramledger estimate ARGS... 2> replay.log > /dev/null
    python3 bench/accuracy/replay_segments.py HISTORY_DIR replay.log

HISTORY_DIR: a run of bench/gpu/jobs/tracer_checks.py history (its segments.json: every
segment the allocator took from the driver, the request that made it and
the bytes allocated before). replay.log: the developer build's stderr,
whose `# segment SIZE for REQUEST allocated BEFORE` lines (lib/model/prog.h)
are the replay's. Prints both totals, the sizes whose counts differ, then
the two lists side by side, the real one with the Python line of each.

By its first argument, also:

  vs-bill: Peak allocated as the training replay predicts it (replay_allocated
    in estimate --explain) and as the analytic bill does, each against the
    measured max_memory_allocated of every training run in the results files
    given.
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


def mode_vs_bill():
    """Peak allocated as the training replay predicts it (replay_allocated in
    estimate --explain) and as the analytic bill does, each against the measured
    max_memory_allocated of every training run in the results files given.

        python3 bench/accuracy/replay_segments.py vs-bill build/vramledger RESULTS.json...

    Since 2026-11-29 the replay's peak is the estimate's where the replay
    runs, so the two columns agree there; replay-vs-bill-allocated.txt in that
    results were written before, with the analytic lines' peak."""
    import json, subprocess, sys, re
    vl = sys.argv[1]
    rows = []
    for f in sys.argv[2:]:
        for r in json.load(open(f))['runs']:
            m = r.get('measured')
            if not m or r.get('task') != 'train' or 'peak_allocated' not in m: continue
            a = [vl, 'estimate', '--model', r['model'], '--precision', r['precision'], '--optimizer', r['optimizer'],
                 '--optimizer-impl', r['optimizer_impl'], '--attention', r['attention'], '--checkpointing', r['checkpointing'],
                 '--batch', str(r['batch']), '--seq', str(r['seq']), '--explain']
            if r.get('lora'): a += ['--lora-rank', str(r['lora'])]
            if r.get('lora_targets'): a += ['--lora-targets', r['lora_targets']]
            if r['precision'].startswith('mixed'): a += ['--master-grads', 'fp32']
            p = subprocess.run(a, capture_output=True, text=True)
            g = re.search(r'replay_allocated = ([\d,]+)', p.stdout)
            b = re.search(r'peak allocated\s+([\d.]+)', p.stdout)
            if not g or not b: continue
            ra = int(g.group(1).replace(',', '')); pa = m['peak_allocated']; ba = float(b.group(1)) * 2**30
            rows.append((r['name'], r['precision'], 100*(ra-pa)/pa, 100*(ba-pa)/pa))
    for n, p, e1, e2 in rows: print('%-48s %-9s replay %+6.1f %%  bill %+6.1f %%' % (n, p, e1, e2))
    import statistics
    print('replay |err| median %.2f max %.1f; bill median %.2f max %.1f; n=%d' % (statistics.median(abs(r[2]) for r in rows), max(abs(r[2]) for r in rows), statistics.median(abs(r[3]) for r in rows), max(abs(r[3]) for r in rows), len(rows)))


MODES = {"vs-bill": mode_vs_bill}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in MODES:
        MODES[sys.argv.pop(1)]()
        sys.exit(0)
    main()
