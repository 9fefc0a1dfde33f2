"""For the trace test: dropout in training on 37,000 elements and, under CPU
autocast, pow of a bfloat16 tensor of 41,000 elements. A CPU dry run that
stands for CUDA saves a one-byte dropout mask (37,000 B, CUDA's fused
kernel) and computes pow in float32 (164,000 B, CUDA autocast's policy)."""
import torch

x = torch.randn(1000, 37, requires_grad=True)
d = torch.nn.functional.dropout(x, 0.1, True)
h = torch.randn(1000, 41, dtype=torch.bfloat16, requires_grad=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    y = torch.pow(h, 3.0)
(d.sum() + y.sum().float()).backward()
print("pow dtype", y.dtype)
