#!/usr/bin/env python3
"""A 2 GiB allocation held for 50 ms in the middle of a quiet second: the
sampler (at 10 ms) and the interposer's peak must both see it."""
import time

import torch

torch.empty(1, device="cuda")
time.sleep(0.5)
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
time.sleep(0.05)
del x
torch.cuda.empty_cache()
time.sleep(0.5)
