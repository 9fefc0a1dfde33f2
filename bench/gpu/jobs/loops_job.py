#!/usr/bin/env python3
"""GPT-2 (random init, batch 8 x 512, bf16 autocast, AdamW) trained for
--steps optimizer steps by a framework's own loop, for the probe:
--loop trainer (Hugging Face Trainer, through accelerate) or lightning
(Lightning's automatic optimisation: forward and backward inside
optimizer.step(closure)). The job knows nothing of vramledger. Prints its
own figures as one JSON line: max_memory_allocated, the parameter and
optimizer-state bytes (numel x element size), its losses."""
import argparse, json, time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--loop", required=True, choices=["trainer", "lightning"])
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=512)
a = ap.parse_args()
torch.manual_seed(0)
cfg = GPT2Config()


class Ids(torch.utils.data.Dataset):
    def __len__(self):
        return a.batch * a.steps

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, cfg.vocab_size, (a.seq,), generator=g)
        return {"input_ids": x, "labels": x}


nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
losses = []
t0 = time.time()
if a.loop == "trainer":
    from transformers import Trainer, TrainerCallback, TrainingArguments
    model = GPT2LMHeadModel(cfg)

    class Keep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(logs["loss"])
    args = TrainingArguments(output_dir="/tmp/vl-loops-trainer", max_steps=a.steps,
                             per_device_train_batch_size=a.batch, bf16=True, logging_steps=1,
                             save_strategy="no", report_to=[], dataloader_num_workers=0,
                             optim="adamw_torch", learning_rate=1e-4, disable_tqdm=True)
    tr = Trainer(model=model, args=args, train_dataset=Ids(), callbacks=[Keep()])
    tr.train()
    opt = tr.optimizer
    opt = getattr(opt, "optimizer", opt)  # accelerate's wrapper
else:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.m = GPT2LMHeadModel(cfg)

        def training_step(self, batch, i):
            loss = self.m(**batch).loss
            losses.append(loss.item())
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4, foreach=True)
    lm = Module()
    tr = L.Trainer(max_steps=a.steps, accelerator="gpu", devices=1, precision="bf16-mixed",
                   logger=False, enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False)
    tr.fit(lm, torch.utils.data.DataLoader(Ids(), batch_size=a.batch))
    model = lm.m
    opt = tr.optimizers[0]
torch.cuda.synchronize()
print(json.dumps({
    "loop": a.loop, "steps": a.steps, "batch": a.batch, "seq": a.seq, "losses": losses,
    "parameters": nbytes(list(model.parameters()) + list(model.buffers())),
    "optimizer_states": nbytes([v for s in opt.state.values() for v in s.values()
                                if torch.is_tensor(v) and v.is_cuda]),
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "wall_s": time.time() - t0, "torch": torch.__version__}))
