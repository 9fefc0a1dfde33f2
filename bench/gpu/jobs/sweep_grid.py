#!/usr/bin/env python3
"""A real sweep for `vramledger fit`: for one model and
settings, train steps over a batch x seq grid in one process (the model is
built once), and write CSV rows batch,seq,peak_bytes,status (peak
allocated over the third step). A point that runs out of memory is 'oom'.

    python3 bench/gpu/jobs/sweep_grid.py OUT.csv MODEL PRECISION ATTENTION B1,B2.. S1,S2..
"""
import csv, gc, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import torch
from vramledger import measure  # the suite's model builder and optimizer

out, model, prec, attn, batches, seqs = sys.argv[1:7]
datadir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data")
c = {"model": model, "precision": prec, "attention": attn}
m, cfg = measure.build(c, datadir)
m.train()
opt = measure.optimizer([p for p in m.parameters() if p.requires_grad], "adamw", "foreach")
amp = prec.startswith("amp-")
rows = []
for b in [int(x) for x in batches.split(",")]:
    for s in [int(x) for x in seqs.split(",")]:
        status, peak = "ok", 0
        try:
            ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
            for step in range(3):
                if step == 2:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                    out_ = m(input_ids=ids, labels=ids)
                out_.loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                del out_
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
        except torch.cuda.OutOfMemoryError:
            status = "oom"
        gc.collect()
        torch.cuda.empty_cache()
        rows.append((b, s, peak, status))
        print(b, s, peak, status, flush=True)
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["batch", "seq", "peak_bytes", "status"])
    w.writerows(rows)
