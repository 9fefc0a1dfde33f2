#!/usr/bin/env python3
"""A GPT-2 training loop that prints its median step time (ms) as JSON:
the workload of the interposer overhead benchmark (bench/gpu/interposer.sh)."""
import json, statistics, sys, time

import torch
from transformers import AutoConfig, AutoModelForCausalLM

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
cfg = AutoConfig.for_model("gpt2")
torch.manual_seed(0)
with torch.device("cuda"):
    m = AutoModelForCausalLM.from_config(cfg)
o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
ids = torch.randint(0, cfg.vocab_size, (8, 1024), device="cuda")
times = []
for i in range(steps + 5):
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(input_ids=ids, labels=ids).loss
    loss.backward()
    o.step()
    o.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    if i >= 5:
        times.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"median_step_ms": statistics.median(times), "steps": steps}))
