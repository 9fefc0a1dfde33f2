"""transformers' Trainer or Lightning's Trainer, for real, on the CPU, with
vramledger's callback attached (the probe records to argv[2]) and
vramledger.mark() called from the job; the metrics the callback logs are
written to argv[3].

usage: loops.py trainer|lightning RECORD OUT.json"""
import json
import sys

import torch

import vramledger
from vramledger.callbacks import LightningCallback, TrainerCallback

which, record, out = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(0)
logged = []


def tiny_gpt2():
    import transformers
    cfg = transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(cfg)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.randint(0, 256, (32,))
        return {"input_ids": ids, "labels": ids}


if which == "trainer":
    import transformers

    class Marked(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            vramledger.mark("train step %d" % state.global_step)

    cb = TrainerCallback(record=record, writers=[lambda m, s: logged.append([s, m])])
    args = transformers.TrainingArguments(output_dir=out + ".dir", max_steps=4, per_device_train_batch_size=4,
                                          logging_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                                          disable_tqdm=True)
    transformers.Trainer(model=tiny_gpt2(), args=args, train_dataset=Tokens(), callbacks=[cb, Marked()]).train()
else:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_gpt2()

        def training_step(self, batch, i):
            vramledger.mark("train step %d" % i)
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    class Logger(L.pytorch.loggers.Logger):
        name, version = "capture", 0

        def log_metrics(self, metrics, step):
            logged.append([step, metrics])

        def log_hyperparams(self, params):
            pass

    trainer = L.Trainer(max_steps=4, accelerator="cpu", logger=Logger(), callbacks=[LightningCallback(record=record)],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), torch.utils.data.DataLoader(Tokens(), batch_size=4))
json.dump(logged, open(out, "w"))
