"""A token model for the runtime guard's throughput trigger: 14 steps of an
embedding + linear on the CPU, then it waits for the sampler and says
whether vramledger asked for its fallback. The wait is on events, not on
the clock: the fallback file there, or fifty more samples in the record
since the last step, 60 s at most however busy the machine. Fifty, not
ten: at --interval-ms 10 the sampler writes its lines in batches every
100 ms (docs/record.md), so ten can land in one batch written before the
guard has read the steps in that wake-up; fifty are five batches, each
after a look of the guard's (ten failed once, in the ASan pass of a
fresh clone's ./test.sh)."""
import os
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


def samples():
    try:
        with open(os.environ["VRAMLEDGER_RECORD"]) as f:
            return sum('"type":"sample"' in line for line in f)
    except (KeyError, OSError):
        return 0


after = samples() + 50
deadline = time.monotonic() + 60
while (not vramledger.fallback_requested() and samples() < after and
       time.monotonic() < deadline):
    time.sleep(0.01)
print("fallback", vramledger.fallback_requested())
