#!/usr/bin/env python3
"""A short-step CPU training job for the probe's own cost: eight
Linear(256, 256) layers, AdamW, batch 16, 200 steps (about 12 ms a step on
the development VM). Run under `vramledger run`; bench/speed/run.sh probe-cost
reads the step events' probe_ns."""
import torch

torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
opt = torch.optim.AdamW(m.parameters(), lr=0.01)
for step in range(200):
    x = torch.randn(16, 256)
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
