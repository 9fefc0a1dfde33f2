"""For the trace test: the same small training job on argv[1]'s device
(cpu or meta), built there. A meta dry run must trace what the CPU one does."""
import sys

import torch

torch.manual_seed(0)
dev = torch.device(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(32, 64, device=dev), torch.nn.LayerNorm(64, device=dev),
                            torch.nn.GELU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(64, 16, device=dev))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x = torch.randn(5, 7, 32, device=dev)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("done on", loss.device)
