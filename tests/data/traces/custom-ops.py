"""A user's own model (no transformers): two pre-norm blocks of a custom
nn.Module, trained on meta tensors for three steps. custom-ops.trace is
`vramledger trace --out DIR -- python custom-ops.py`'s DIR/alloc.trace
(the stack Python: PyTorch 2.13's CPU build), for trace --gpu's goldens."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Net(nn.Module):
    def __init__(self, vocab=512, d=256, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


model = Net().to(device="meta", dtype=torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), foreach=True)
ids = torch.randint(0, 512, (4, 128)).to("meta")
for _ in range(3):
    logits = model(ids)
    loss = F.cross_entropy(logits.view(-1, 512).float(), ids.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
