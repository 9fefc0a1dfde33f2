"""For the trace test: scaled_dot_product_attention on meta tensors in
training. Prints (JSON) the kernel the tracer takes for CUDA in each case of
CASES, then runs T5's case forward and backward: bf16, 3 x 4 heads x 64
tokens x 16, its position bias a permuted view that trains, dropout 0.1.
CUDA runs that on its math path (no fused kernel takes a mask whose last
stride is not 1), upcast to fp32, and drops out the probabilities with its
fused kernel: a bool mask of 3 x 4 x 64 x 64 (49,152 B), then the fp32
output (196,608 B)."""
import json
import sys

import torch
import torch.nn.functional as F

from vramledger import tracer

if not hasattr(torch.ops.aten, "_safe_softmax"):  # SDPA's math path as the tracer knows it: 2.5 on
    print(json.dumps({"skip": torch.__version__}))
    sys.exit(0)
B, H, S, D = 3, 4, 64, 16


def qkv(dtype, kv_heads=H):
    def one(h):  # (batch, heads, tokens, head dim) views of a linear's output, as transformers makes
        return torch.empty(B, S, h, D, dtype=dtype, device="meta", requires_grad=True).transpose(1, 2)
    return one(H), one(kv_heads), one(kv_heads)


def bias(dtype, grad):
    """T5's position bias: (tokens, tokens, heads) permuted to (1, heads, tokens, tokens)"""
    return torch.empty(S, S, H, dtype=dtype, device="meta", requires_grad=grad).permute(2, 0, 1).unsqueeze(0)


bf16, fp32 = torch.bfloat16, torch.float32
CASES = {  # name: (q, k, v, mask, dropout, causal, enable_gqa)
    "t5 bf16": qkv(bf16) + (bias(bf16, True), 0.1, False, False),
    "t5 fp32": qkv(fp32) + (bias(fp32, True), 0.1, False, False),
    "causal bf16": qkv(bf16) + (None, 0.0, True, False),
    "causal bf16 dropout 0.1": qkv(bf16) + (None, 0.1, True, False),
    "causal bf16 dropout 0.125": qkv(bf16) + (None, 0.125, True, False),
    "padding mask bf16 dropout 0.1": qkv(bf16) + (torch.ones(B, 1, S, S, dtype=torch.bool, device="meta"),
                                                  0.1, False, False),
    "mask that trains bf16": qkv(bf16) + (torch.zeros(1, H, S, S, dtype=bf16, device="meta",
                                                      requires_grad=True), 0.0, False, False),
    "padding mask fp32 dropout 0.1": qkv(fp32) + (torch.ones(B, 1, S, S, dtype=torch.bool, device="meta"),
                                                  0.1, False, False),
    "grouped bf16 dropout 0.1": qkv(bf16, 2) + (None, 0.1, True, True),
    "grouped fp32 dropout 0.1": qkv(fp32, 2) + (None, 0.1, True, True),
}
print(json.dumps({name: tracer._cuda_sdpa_backend(torch, *c) for name, c in CASES.items()}))
q, k, v, mask, p, causal, gqa = CASES["t5 bf16"]
out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
out.float().sum().backward()
# at::dropout itself (C++ composites call it): CUDA's fused kernel in
# training (a mask of 343 B, an output of 1,372), and no tensor of its own
# where the composite returns its input (p = 0, evaluation)
x = torch.empty(7, 7, 7, device="meta", requires_grad=True)
kept = [torch.dropout(x, 0.0, True), torch.dropout(x, 0.5, False), torch.dropout(x, 0.5, True)]
