"""vramledger's training callbacks with the real trainers, on a GPU: a small
GPT-2 trained 6 steps by transformers' Trainer (TrainerCallback) or by
Lightning (LightningCallback), under `vramledger run`; the callback's
logged metrics are written to OUT, for bench/accuracy/callbacks_check.py to compare
with the run's record.
  vramledger run --out DIR -- python3 bench/gpu/jobs/callbacks_job.py hf|lightning OUT"""
import json
import sys

import torch
import transformers

from vramledger.callbacks import LightningCallback, TrainerCallback

mode, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=4096, n_positions=256)
model = transformers.GPT2LMHeadModel(cfg)
data = [torch.randint(0, 4096, (128,)) for _ in range(64)]
logged = []


def keep(metrics, step):
    logged.append([step, metrics])


if mode == "hf":
    ds = [{"input_ids": x, "labels": x} for x in data]
    args = transformers.TrainingArguments(output_dir="/tmp/vl-cb-hf", per_device_train_batch_size=8,
                                          max_steps=6, logging_steps=1, report_to=[], bf16=True,
                                          save_strategy="no")
    transformers.Trainer(model=model.cuda(), args=args, train_dataset=ds,
                         callbacks=[TrainerCallback(writers=[keep])]).train()
else:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.m = model

        def training_step(self, batch, i):
            return self.m(input_ids=batch, labels=batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Logger(L.pytorch.loggers.Logger):
        name, version = "keep", 0

        def log_metrics(self, metrics, step):
            if any(k.startswith("vramledger/") for k in metrics):
                keep(metrics, step)

        def log_hyperparams(self, *a, **k):
            pass

    loader = torch.utils.data.DataLoader(torch.stack(data), batch_size=8)
    L.Trainer(max_steps=6, precision="bf16-mixed", logger=Logger(), enable_checkpointing=False,
              enable_progress_bar=False, callbacks=[LightningCallback()]).fit(Module(), loader)
with open(out, "w") as f:
    json.dump(logged, f)
