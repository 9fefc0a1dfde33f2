#!/usr/bin/env python3
"""One point of a sweep: GPT-2 (random init) trained for a few steps at
--batch x --seq, AMP bf16, AdamW foreach, eager attention (so memory grows
with seq^2); or with --model llama a Llama-shaped model (8 layers, hidden
1024, GQA 16/4, vocab 32000) with SDPA. Prints PyTorch's peaks as JSON. Run under `vramledger sweep`
(bench/results/sweep-fit/)."""
import argparse, json, os, sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import vramledger  # mark("step"): steps and tokens per second in the sweep

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--seq", type=int, required=True)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--model", default="gpt2")
a = ap.parse_args()
if a.model == "llama":
    cfg = AutoConfig.for_model("llama", hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                               num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                               max_position_embeddings=4096, attn_implementation="sdpa")
else:
    cfg = AutoConfig.for_model("gpt2", attn_implementation="eager")
torch.manual_seed(0)
with torch.device("cuda"):
    m = AutoModelForCausalLM.from_config(cfg)
o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
for _ in range(a.steps):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(input_ids=ids, labels=ids).loss
    loss.backward()
    o.step()
    o.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    vramledger.mark("step")
print(json.dumps({"batch": a.batch, "seq": a.seq,
                  "max_allocated": torch.cuda.max_memory_allocated(),
                  "max_reserved": torch.cuda.max_memory_reserved()}))
