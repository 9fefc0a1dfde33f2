#!/usr/bin/env python3
"""The jobs of bench/speed/run.sh, one by its first argument:

  dry-run: A job for the dry run's speed benchmark (bench/speed/run.sh
    dry-run): a decoder of Llama-2-7B's shape (32 layers, hidden 4096, MLP
    11008, 32 heads, vocab 32000; 6.7 B parameters) in plain PyTorch, so that
    it needs no transformers, trained for --steps steps in bf16 with AdamW on
    --device (meta: no memory, no compute). It knows nothing of vramledger.
  probe-cost: A short-step CPU training job for the probe's own cost: eight
    Linear(256, 256) layers, AdamW, batch 16, 200 steps (about 12 ms a step on
    the development VM). Run under `vramledger run`; bench/speed/run.sh
    probe-cost reads the step events' probe_ns.
"""
import sys


def mode_dry_run():
    """A job for the dry run's speed benchmark (bench/speed/run.sh dry-run): a
    decoder of Llama-2-7B's shape (32 layers, hidden 4096, MLP 11008, 32 heads,
    vocab 32000; 6.7 B parameters) in plain PyTorch, so that it needs no
    transformers, trained for --steps steps in bf16 with AdamW on --device
    (meta: no memory, no compute). It knows nothing of vramledger.

      python3 bench/speed/jobs.py dry-run [--device meta] [--steps 2] [--batch 1] [--seq 2048] [--layers 32]"""
    import argparse

    import torch
    import torch.nn.functional as F

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="meta")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=32)
    a = ap.parse_args()
    D, FF, H, V = 4096, 11008, 32, 32000
    dev = torch.device(a.device)  # every module made there: no 27 GB of fp32 weights on the CPU first


    class RMSNorm(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(d, device=dev))

        def forward(self, x):
            v = x.float().pow(2).mean(-1, keepdim=True)
            return self.weight * (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype)


    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(D), RMSNorm(D)
            self.qkv = torch.nn.Linear(D, 3 * D, bias=False, device=dev)
            self.o = torch.nn.Linear(D, D, bias=False, device=dev)
            self.gate_up = torch.nn.Linear(D, 2 * FF, bias=False, device=dev)
            self.down = torch.nn.Linear(FF, D, bias=False, device=dev)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, s, 3, H, D // H).permute(2, 0, 3, 1, 4)
            if hasattr(F, "scaled_dot_product_attention"):
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # PyTorch before 2.0
                w = (q @ k.transpose(-1, -2)) / (D // H) ** 0.5
                att = torch.softmax(w.float(), -1).to(q.dtype) @ v
            x = x + self.o(att.transpose(1, 2).reshape(b, s, D))
            g, u = self.gate_up(self.n2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)


    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(V, D, device=dev)
            self.layers = torch.nn.ModuleList(Layer() for _ in range(a.layers))
            self.norm = RMSNorm(D)
            self.head = torch.nn.Linear(D, V, bias=False, device=dev)

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))


    model = Decoder().to(dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, V, (a.batch, a.seq)).to(dev)
    for _ in range(a.steps):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(sum(p.numel() for p in model.parameters()))


def mode_probe_cost():
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


MODES = {"dry-run": mode_dry_run, "probe-cost": mode_probe_cost}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s dry-run|probe-cost [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
