"""A tiny training loop with vramledger's callbacks, outside `vramledger
run`: the probe attached by the callback itself (record=), the trainers'
hooks called as transformers' Trainer and Lightning call them, the
metrics captured by a writer and a fake Lightning logger.
argv: RECORD OUT.json STEPS"""
import json
import sys

import torch

from vramledger.callbacks import LightningCallback, TrainerCallback

record, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
logged = {"hf": [], "lightning": []}
hf = TrainerCallback(record=record, estimate={"peak_allocated_bytes": 1 << 20},
                     writers=[lambda m, s: logged["hf"].append([s, m])])
lc = LightningCallback()  # the same probe: one per process


class Logger:  # a Lightning logger's one method the callback uses
    def log_metrics(self, metrics, step):
        logged["lightning"].append([step, metrics])


class State:
    global_step = 0


class Trainer:
    loggers = [Logger()]
    global_step = 0


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
state, trainer = State(), Trainer()
for i in range(steps):
    x = torch.randn(8, 32)
    loss = torch.nn.functional.mse_loss(model(x), torch.zeros(8, 16))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    state.global_step = trainer.global_step = i + 1
    hf.on_step_end(None, state, None)
    lc.on_train_batch_end(trainer, model, None, None, i)
with open(out, "w") as f:
    json.dump(logged, f)
