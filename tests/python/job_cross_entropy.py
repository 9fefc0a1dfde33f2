"""For the trace test: a classification head and its loss under CPU
autocast, as a masked-LM head is. Prints nothing."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
head = torch.nn.Linear(64, 5000)
x = torch.randn(256, 64)
y = torch.randint(0, 5000, (256,))
with torch.autocast("cpu", dtype=torch.bfloat16):
    loss = F.cross_entropy(head(x), y)
loss.backward()
