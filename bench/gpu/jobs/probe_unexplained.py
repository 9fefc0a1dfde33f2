#!/usr/bin/env python3
"""What holds the bytes the probe's categories do not name? GPT-2 (AMP
bf16, SDPA, AdamW foreach, batch 8 x 512), PyTorch's allocation history on;
after the second step's backward, every live block of the caching
allocator that is not a parameter, gradient or optimizer-state storage is
listed with its size and the Python frames that allocated it. No probe."""
import json
import torch
from transformers import GPT2Config, AutoModelForCausalLM

from job_common import known_storages, unknown_blocks

torch.manual_seed(0)
torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
with torch.device("cuda"):
    m = AutoModelForCausalLM.from_config(GPT2Config(attn_implementation="sdpa"))
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
ids = torch.randint(0, 50257, (8, 512), device="cuda")
out = {}
for step in range(2):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(input_ids=ids, labels=ids).loss
    loss.backward()
    if step == 1:
        rest = unknown_blocks(torch, known_storages(torch, m, opt, ids))
        out = {"memory_allocated": torch.cuda.memory_allocated(),
               "named_bytes": None, "unnamed_blocks": len(rest),
               "unnamed_bytes": sum(r["bytes"] for r in rest), "top": rest[:15],
               "torch": torch.__version__}
    opt.step()
    opt.zero_grad(set_to_none=True)
print(json.dumps(out))
