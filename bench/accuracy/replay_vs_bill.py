#!/usr/bin/env python3
"""Peak allocated as the training replay predicts it (replay_allocated in
estimate --explain) and as the analytic bill does, each against the measured
max_memory_allocated of every training run in the results files given.

    python3 bench/accuracy/replay_vs_bill.py build/vramledger RESULTS.json...

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
