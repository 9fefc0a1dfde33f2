"""For the trace test: a small model on (batch, 7, 32) inputs, batch from
argv, Adam, three steps, on the CPU. A trace at batch 3 replayed as batch 6
must hold what a trace at batch 6 holds."""
import sys

import torch

torch.manual_seed(0)
B = int(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.GELU(),
                            torch.nn.Linear(64, 16))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x = torch.randn(B, 7, 32)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("loss %.6f" % loss.item())
