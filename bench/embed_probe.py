"""What a model's forward allocates before its first layer, with the Python
line of each block and when it is freed (issue 3: does Gemma keep its
unscaled embeddings while the layers run?). Prints the allocations and
frees of blocks >= 1 MiB from the forward's start to the first layer's
first projection, and whether each embedding-sized block is still live
when the head runs. Usage: embed_probe.py MODEL PRECISION BATCH SEQ"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from vramledger import measure  # noqa: E402

model, prec, B, S = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
m, cfg = measure.build({"model": model, "precision": prec, "attention": "sdpa"}, data)
m.train()
ids = torch.randint(0, cfg.vocab_size, (B, S), device="cuda")
torch.cuda.synchronize()
torch.cuda.memory._record_memory_history(max_entries=1000000)
ctx = torch.autocast("cuda", dtype=torch.bfloat16) if prec.startswith("amp") else torch.autocast("cuda", enabled=False)
with ctx:
    out = m(input_ids=ids, labels=ids)
torch.cuda.synchronize()
snap = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
tr = snap["device_traces"][0]
emb = B * S * cfg.hidden_size
first = None
for i, e in enumerate(tr):
    if e["action"] == "alloc" and any("modeling_" in f["filename"] for f in e.get("frames", [])):
        first = i
        break
born = {}
shown = 0
print("model %s %s B=%d S=%d: T*h = %d elements" % (model, prec, B, S, emb))
for i, e in enumerate(tr[first:], first):
    if e["size"] < 2 ** 20 or e["action"] not in ("alloc", "free_completed"):
        continue
    py = [f for f in e.get("frames", []) if f["filename"].endswith(".py")]  # C++ frames first
    where = " < ".join("%s:%d %s" % (os.path.basename(f["filename"]), f["line"], f["name"])
                       for f in py[:4])
    if e["action"] == "alloc":
        born[e["addr"]] = (i, e["size"], where)
    else:
        b = born.pop(e["addr"], None)
        if b and b[1] % emb == 0 and b[1] // emb in (2, 4):
            print("  freed  #%d (made #%d, %d bytes, %s) at #%d %s" % (i, b[0], b[1], b[2][:90], i, where[:120]))
    if shown < 40:
        print("%6d %-14s %12d %s" % (i, e["action"], e["size"], where[:200]))
        shown += 1
print("embedding-sized blocks never freed in the forward:")
for a, (i, s, w) in born.items():
    if s % emb == 0 and s // emb in (2, 4):
        print("  #%d %d %s" % (i, s, w[:160]))
