#!/usr/bin/env python3
"""A training job for the allocation-replay evidence: the same
script runs on the GPU (measured) and on the CPU (`vramledger trace`'s dry
run, predicted). It knows nothing of vramledger.

  --device cuda|cpu|meta  --model gpt2|llama|llama70b|bert|mlp|conv  --precision fp32|bf16|amp-bf16
  [--opt adamw|adamw-fused|adamw-loop|sgd|adam] [--ckpt] [--lora 16] [--attn sdpa|eager]
  [--batch 4 --seq 256 --steps 3] [--history FILE]

mlp and conv are models no estimator knows: a residual MLP with a custom
loss, and a small convolutional network. With --history on CUDA, the
caching allocator's own event history (torch.cuda.memory's
_record_memory_history) is dumped to FILE, for the replay's exactness
check. Prints one JSON line: the job's max_memory_allocated/reserved.
"""
import argparse
import contextlib
import json
import sys

import torch
import torch.utils.checkpoint

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cuda")
ap.add_argument("--model", default="gpt2")
ap.add_argument("--precision", default="amp-bf16")
ap.add_argument("--opt", default="adamw")
ap.add_argument("--ckpt", action="store_true")
ap.add_argument("--lora", type=int, default=0)
ap.add_argument("--attn", default="sdpa")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=256)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--history")
a = ap.parse_args()
dev = torch.device(a.device)
cuda = dev.type == "cuda"
if cuda and a.history:
    torch.cuda.memory._record_memory_history(max_entries=4_000_000)
torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class ResidualMLP(torch.nn.Module):
    """Not a transformer: 8 residual blocks on 1024 features, 10 classes."""
    def __init__(self, d=1024, n=8):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        for b in self.blocks:
            if a.ckpt:
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        return self.head(x)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for w in (64, 128, 256):
            layers += [torch.nn.Conv2d(c, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                       torch.nn.Conv2d(w, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(2)]
            c = w
        self.body = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(256 * 8 * 8, 10)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


def hf_model():
    from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, GPT2Config,
                              LlamaConfig)
    if a.model == "gpt2":
        cfg, targets = GPT2Config(attn_implementation=a.attn), ["c_attn"]
    elif a.model == "llama70b":  # Llama-2-70B's shape: for meta tensors only
        cfg = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                          num_attention_heads=64, num_key_value_heads=8, vocab_size=32000,
                          max_position_embeddings=4096, attn_implementation=a.attn)
        targets = ["q_proj", "v_proj"]
    elif a.model == "llama":
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                          max_position_embeddings=4096, attn_implementation=a.attn)
        targets = ["q_proj", "v_proj"]
    else:
        cfg, targets = BertConfig(attn_implementation=a.attn), ["query", "value"]
    with dev:
        m = (AutoModelForMaskedLM if a.model == "bert" else AutoModelForCausalLM).from_config(cfg)
    return m, targets, cfg.vocab_size


hf = a.model in ("gpt2", "llama", "llama70b", "bert")
if hf:
    model, targets, vocab = hf_model()
elif a.model == "mlp":
    model = ResidualMLP().to(dev)
elif a.model == "conv":
    model = ConvNet().to(dev)
else:
    sys.exit("unknown model " + a.model)
if a.precision == "bf16":
    model.to(torch.bfloat16)
if a.ckpt and hf:
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
if a.lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=a.lora, lora_alpha=2 * a.lora,
                                             target_modules=targets, lora_dropout=0.0))
params = [p for p in model.parameters() if p.requires_grad]
if a.opt == "adamw":  # PyTorch's default implementation for the device
    opt = torch.optim.AdamW(params, lr=1e-4)
elif a.opt == "adamw-fused":
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
elif a.opt == "adamw-loop":
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)
elif a.opt == "adam":
    opt = torch.optim.Adam(params, lr=1e-4)
elif a.opt == "sgd":
    opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
else:
    sys.exit("unknown optimizer " + a.opt)

g = torch.Generator().manual_seed(1)
for step in range(a.steps):
    if hf:
        ids = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
        batch = {"input_ids": ids, "labels": ids}
        if dev.type == "meta":  # transformers reads position ids' values to find packed
            batch["attention_mask"] = torch.ones_like(ids)  # sequences when no mask is given
    elif a.model == "mlp":
        x = torch.randn(a.batch, 1024, generator=g).to(dev)
        y = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
    else:
        x = torch.randn(a.batch, 3, 64, 64, generator=g).to(dev)
        y = torch.randint(0, 10, (a.batch,), generator=g).to(dev)
    if a.precision == "bf16" and not hf:
        x = x.to(torch.bfloat16)
    amp = a.precision == "amp-bf16"  # (there is no autocast for meta tensors)
    with torch.autocast(device_type=dev.type, dtype=torch.bfloat16) if amp else contextlib.nullcontext():
        if hf:
            loss = model(**batch).loss
        else:
            logits = model(x).float()
            # a loss of our own: softmax cross-entropy plus a margin term
            logp = torch.log_softmax(logits, dim=-1)
            loss = -logp.gather(1, y[:, None]).mean() + 0.01 * logits.pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
out = {"device": a.device, "params": sum(p.numel() for p in model.parameters()),
       "loss": None if dev.type == "meta" else float(loss), "torch": torch.__version__}
if cuda:
    torch.cuda.synchronize()
    out["max_allocated"] = torch.cuda.max_memory_allocated()
    out["max_reserved"] = torch.cuda.max_memory_reserved()
    if a.history:
        torch.cuda.memory._dump_snapshot(a.history)
        torch.cuda.memory._record_memory_history(enabled=None)
print(json.dumps(out))
