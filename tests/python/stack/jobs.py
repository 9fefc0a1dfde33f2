"""Jobs a user writes, for the stack test (test_jobs.py): each builds its
model on argv[2]'s device (meta or cpu) and trains three steps, or
generates; argv[3] names a JSON file for what the job knows of itself
(its parameter count, the bytes of its model states).

usage: jobs.py KIND DEVICE OUT.json
KIND: encoder_lm | convnet | lora | ckpt | generate | accelerate"""
import json
import sys

import torch
from torch import nn

kind, dev, out = sys.argv[1], torch.device(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)


def tiny_llama():
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=256)
    with torch.device(dev):
        return transformers.LlamaForCausalLM(cfg)


class EncoderLM(nn.Module):
    """a plain nn.TransformerEncoder language model"""

    def __init__(self, vocab=512, d=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)))


def convnet():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def train(model, batch, loss_fn, steps=3, backward=None):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    for _ in range(steps):
        loss = loss_fn(model, batch)
        (backward or (lambda l: l.backward()))(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return opt


def lm_loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


model = None
ids = torch.randint(0, 512, (2, 64), device=dev)
if kind == "encoder_lm":
    with torch.device(dev):
        model = EncoderLM()
    train(model, ids, lambda m, x: nn.functional.cross_entropy(m(x).flatten(0, 1), x.flatten()))
elif kind == "convnet":
    with torch.device(dev):
        model = convnet()
    x, y = torch.randn(8, 3, 32, 32, device=dev), torch.randint(0, 10, (8,), device=dev)
    train(model, None, lambda m, _: nn.functional.cross_entropy(m(x), y))
elif kind == "lora":
    import peft
    model = peft.get_peft_model(tiny_llama(), peft.LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    train(model, ids, lm_loss)
elif kind == "ckpt":
    model = tiny_llama()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    train(model, ids, lm_loss)
elif kind == "generate":
    model = tiny_llama()
    model.eval()
    with torch.no_grad():
        gen = model.generate(ids[:, :16], max_new_tokens=8, do_sample=False, min_new_tokens=8)
    assert gen.shape == (2, 24), gen.shape
elif kind == "accelerate":
    import accelerate
    acc = accelerate.Accelerator(cpu=True)
    model = tiny_llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = acc.prepare(model, opt)
    for _ in range(3):
        acc.backward(lm_loss(model, ids))
        opt.step()
        opt.zero_grad(set_to_none=True)
else:
    sys.exit("jobs.py: no job %r" % kind)

trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
params = sum(p.numel() * p.element_size() for p in model.parameters())
# what surely lives at the peak of a training step: the weights, and for the
# trained ones a gradient and AdamW's two states (fp32 here)
floor = params + (0 if kind == "generate" else 3 * 4 * trainable)
json.dump({"kind": kind, "device": str(dev), "trainable": trainable, "floor_bytes": floor}, open(out, "w"))
print("done:", kind, "on", dev)
