"""For the trace test: a job on meta tensors that reads values, as
transformers does with masks and position ids. Prints what it read (JSON)."""
import json

import torch

m = torch.device("meta")
cpu_ids = torch.randint(0, 100, (2, 8))
ids = cpu_ids.to(m)  # from the CPU: its values travel
mask = torch.ones_like(ids)
mask[1, 6:] = 0  # padding in the second sequence
pos = torch.arange(8, device=m).expand(2, 8)
out = {
    "all_ones": bool(torch.all(mask == 1)),           # False: padding
    "padded_rows": int((mask == 0).any(dim=1).sum()),  # 1
    "packed": bool((pos[:, 1:] - pos[:, :-1] != 1).any()),  # False
    "nonzero_rows": int((mask != 0).nonzero().shape[0]),  # 14: a shape from values
    "ids_equal": torch.equal(ids, ids.clone()),
    "back_to_cpu": bool(torch.equal(ids.cpu(), cpu_ids)),  # a copy out of meta
    "tolist": ids.tolist() == cpu_ids.tolist(),
}
w = torch.nn.Linear(8, 4, device=m)
loss = w(ids.float()).pow(2).mean()
loss.backward()
out["loss"] = loss.item()  # unknown on meta: 0.0
# generate()'s stopping rule: tokens nobody knows are never the stop tokens
tokens = w(ids.float()).argmax(-1)
out["stopped"] = bool(torch.isin(tokens, torch.tensor([2, 3], device=m)).any())  # False
torch.cuda.empty_cache()  # no GPU: does nothing, and is an event of the trace
print(json.dumps(out))
