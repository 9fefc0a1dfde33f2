#!/usr/bin/env python3
"""What the training loops people run keep alive: one bundled config
(random weights) trained for --steps optimizer steps by a plain loop, the
Hugging Face Trainer (its own defaults: optimizer, max_grad_norm, outputs),
Lightning's automatic optimization (precision "bf16-mixed") and
accelerate (mixed_precision "bf16", accelerator.backward), each in a
process of its own; prints one JSON line per loop: torch's
max_memory_allocated and max_memory_reserved over the run, the Trainer's
optim and max_grad_norm.

    python3 bench/gpu/jobs/loops_measure.py OUT.json MODEL BATCH SEQ [--steps N]
"""
import json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(loop, model, batch, seq, steps):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    with open(os.path.join(HERE, "..", "..", "..", "data", "models", model + ".json")) as f:
        d = json.load(f)
    mt = d.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype"):
        d.pop(k, None)
    cfg = AutoConfig.for_model(mt, **d)
    torch.manual_seed(0)

    class Ids(torch.utils.data.Dataset):
        def __len__(self):
            return batch * steps

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            x = torch.randint(0, cfg.vocab_size, (seq,), generator=g)
            return {"input_ids": x, "labels": x}

    rec = {"loop": loop, "model": model, "batch": batch, "seq": seq, "steps": steps}
    if loop == "plain":
        m = AutoModelForCausalLM.from_config(cfg).cuda().train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5, foreach=True)
        dl = torch.utils.data.DataLoader(Ids(), batch_size=batch)
        for b in dl:
            b = {k: v.cuda() for k, v in b.items()}
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = m(**b)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del out
    elif loop == "trainer":
        from transformers import Trainer, TrainingArguments
        m = AutoModelForCausalLM.from_config(cfg)
        args = TrainingArguments(output_dir="/tmp/vl-loops-trainer", max_steps=steps,
                                 per_device_train_batch_size=batch, bf16=True, logging_steps=1,
                                 save_strategy="no", report_to=[], dataloader_num_workers=0,
                                 learning_rate=1e-5, disable_tqdm=True)
        rec.update(optim=str(args.optim), max_grad_norm=args.max_grad_norm)
        Trainer(model=m, args=args, train_dataset=Ids()).train()
    elif loop == "lightning":
        import lightning as L

        class Module(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.m = AutoModelForCausalLM.from_config(cfg)

            def training_step(self, b, i):
                return self.m(**b).loss

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-5, foreach=True)
        L.Trainer(max_steps=steps, accelerator="gpu", devices=1, precision="bf16-mixed",
                  logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False).fit(Module(),
                                                  torch.utils.data.DataLoader(Ids(), batch_size=batch))
    elif loop == "accelerate":
        from accelerate import Accelerator
        acc = Accelerator(mixed_precision="bf16")
        m = AutoModelForCausalLM.from_config(cfg)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5, foreach=True)
        m, opt, dl = acc.prepare(m, opt, torch.utils.data.DataLoader(Ids(), batch_size=batch))
        m.train()
        for b in dl:
            out = m(**b)
            acc.backward(out.loss)
            opt.step()
            opt.zero_grad()
    torch.cuda.synchronize()
    rec.update(max_memory_allocated=torch.cuda.max_memory_allocated(),
               max_memory_reserved=torch.cuda.max_memory_reserved(), torch=torch.__version__)
    print("RESULT " + json.dumps(rec), flush=True)


def main():
    if sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        return
    out, model, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3
    recs = []
    if os.path.exists(out):
        with open(out) as f:
            recs = json.load(f)["runs"]
    for loop in ("plain", "trainer", "lightning", "accelerate"):
        t0 = time.time()
        p = subprocess.run([sys.executable, __file__, "--child", loop, model, str(batch), str(seq),
                            str(steps)], capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        r = json.loads(line[-1][7:]) if line else {"loop": loop, "model": model, "batch": batch,
                                                     "seq": seq, "error": p.stderr[-800:]}
        r["wall_s"] = round(time.time() - t0, 1)
        print(json.dumps(r), flush=True)
        recs.append(r)
        with open(out, "w") as f:
            json.dump({"runs": recs}, f, indent=1)


if __name__ == "__main__":
    main()
