"""A token model for the runtime guard's throughput trigger: 14 steps of an
embedding + linear on the CPU, then it waits for the sampler and says
whether vramledger asked for its fallback."""
import time

import torch

import vramledger

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Embedding(100, 16), torch.nn.Linear(16, 100))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(14):
    ids = torch.randint(0, 100, (4, 32))
    loss = torch.nn.functional.cross_entropy(m(ids).view(-1, 100), ids.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.01)
time.sleep(0.5)
print("fallback", vramledger.fallback_requested())
