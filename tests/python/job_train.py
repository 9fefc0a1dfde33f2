"""A tiny training job for the probe's tests: Linear(32,64) -> ReLU ->
Linear(64,16), MSE loss outside the model, float32 on the CPU.
argv: optimizer (sgd-momentum|adam) accumulation steps [OPTIONS]
OPTIONS, comma-separated: break-probe (make the probe's bill raise),
ckpt (the model under non-reentrant activation checkpointing),
closure (forward and backward inside optimizer.step(closure), as
Lightning's automatic optimisation does), amp (the forward under CPU
autocast, bfloat16), cache (the model returns a dict with a key/value
cache object beside its output, as a transformers causal LM does)"""
import sys

import torch

torch.manual_seed(0)
B = 8
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
opt_name, accum, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if opt_name == "adam":
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
else:
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
options = sys.argv[4].split(",") if len(sys.argv) > 4 else []
if "break-probe" in options:
    from vramledger import probe
    p = probe.install()

    def broken():
        raise RuntimeError("deliberately broken")
    p.bill = broken



class Outer(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        return checkpoint(self.inner, x, use_reentrant=False)


outer = Outer(model)


class KVLayer:
    def __init__(self, keys, values):
        self.keys, self.values = keys, values


class KVCache:  # the shape of transformers' DynamicCache: .layers[i].keys/.values
    def __init__(self, layers):
        self.layers = layers


class WithCache(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        kv = KVCache([KVLayer(x * 2, x * 3)])  # B x 32 float32 each
        return {"logits": self.inner(x), "past_key_values": kv}


with_cache = WithCache(model)


def closure():
    global loss
    opt.zero_grad()
    y = model(torch.randn(B, 32))
    loss = torch.nn.functional.mse_loss(y, torch.zeros(B, 16))
    loss.backward()
    return loss


for step in range(steps):
    if "closure" in options:
        opt.step(closure)
        continue
    for k in range(accum):
        x = torch.randn(B, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled="amp" in options):
            if "ckpt" in options and "amp" in options:
                y = outer(x.requires_grad_())  # checkpointing inside the model, as transformers
            elif "cache" in options:
                out = with_cache(x)
                y = out["logits"]
            elif "ckpt" in options:
                from torch.utils.checkpoint import checkpoint
                y = checkpoint(model, x.requires_grad_(), use_reentrant=False)
            else:
                y = model(x)
        y = y.float()
        loss = torch.nn.functional.mse_loss(y, torch.zeros(B, 16))
        loss.backward()
    opt.step()
    opt.zero_grad()
with torch.no_grad():
    model(torch.randn(B, 32))
print("final loss %.9f" % loss.item())
print("max_memory_allocated_api", hasattr(torch.cuda, "max_memory_allocated"))
