"""Two-rank DDP on the CPU (gloo) for the probe's tests: rank 1 takes twice
the batch, so its activations are twice rank 0's. Launched by the test with
RANK/WORLD_SIZE/MASTER_* set (torchrun of Debian's torch 1.13 fails on
Python 3.11)."""
import datetime

import torch
import torch.distributed as dist

# a rank whose peer never comes fails in a minute instead of waiting half an hour
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
r = dist.get_rank()
torch.manual_seed(0)
m = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
B = 8 * (r + 1)
for step in range(4):
    x = torch.randn(B, 32)
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("rank", r, "done")
dist.destroy_process_group()
