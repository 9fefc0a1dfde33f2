#!/usr/bin/env python3
"""GPU jobs the suites run, most under `vramledger run` (bench/gpu/interposer.sh,
probe.sh, parallel.sh): small workloads, the loops people run, the training
callbacks, the blocks the probe leaves unnamed; one by its first argument:

  spike: A 2 GiB allocation held for 50 ms in the middle of a quiet second:
    the sampler (at 10 ms) and the interposer's peak must both see it.
  gpt2-loop: A GPT-2 training loop that prints its median step time (ms) as
    JSON: the workload of the interposer overhead benchmark
    (bench/gpu/interposer.sh).
  scatter: The smallest job that crashed under the interposer on 2 H200s
    (bench/results/parallel-calibration): a NCCL scatter, the first
    point-to-point operation (DTensor's distribute_tensor uses it). torchrun
    --nproc-per-node 2 bench/gpu/jobs/workloads.py scatter
  interposer-check: Run under `vramledger run` (the interposer preloaded): at
    quiet points of a GPT-2 training loop, compare the interposer's live bytes
    with torch.cuda.memory_reserved(). One allocator mode per process, chosen
    by PYTORCH_CUDA_ALLOC_CONF (default, expandable_segments:True,
    backend:cudaMallocAsync). Prints one JSON line per quiet point.
  loops: GPT-2 (random init, batch 8 x 512, bf16 autocast, AdamW) trained
    for --steps optimizer steps by a framework's own loop, for the probe:
    --loop trainer (Hugging Face Trainer, through accelerate) or lightning
    (Lightning's automatic optimisation: forward and backward inside
    optimizer.step(closure)). The job knows nothing of vramledger. Prints
    its own figures as one JSON line: max_memory_allocated, the parameter
    and optimizer-state bytes (numel x element size), its losses.
  callbacks: vramledger's training callbacks with the real trainers, on a
    GPU: a small GPT-2 trained 6 steps by transformers' Trainer
    (TrainerCallback) or by Lightning (LightningCallback), under `vramledger
    run`; the callback's logged metrics are written to OUT, for
    bench/accuracy/compare.py callbacks to compare with the run's record.
    vramledger run --out DIR -- python3 bench/gpu/jobs/workloads.py callbacks
    hf|lightning OUT
  unexplained: What holds the bytes the probe's categories do not name?
    GPT-2 (AMP bf16, SDPA, AdamW foreach, batch 8 x 512), PyTorch's
    allocation history on; after the second step's backward, every live
    block of the caching allocator that is not a parameter, gradient or
    optimizer-state storage is listed with its size and the Python frames
    that allocated it. No probe.
  unnamed: What the probe's categories leave unnamed, block by block. The
    probe runs in-process (every step sampled); after step 2's forward and
    after its backward, every live block of PyTorch's caching allocator that
    is not a storage the probe named (parameters, gradients, optimizer
    state, saved tensors, outputs) is listed with its size and allocating
    frames. usage: workloads.py unnamed MODEL PRECISION [ckpt]   (models of
    workloads.py probe)
  probe: A Hugging Face training job for the probe's GPU evidence. It knows
    nothing of vramledger: `vramledger run` attaches the probe.
  loops-measure: What the training loops people run keep alive: one bundled
    config (random weights) trained for --steps optimizer steps by a plain
    loop, the Hugging Face Trainer (its own defaults: optimizer,
    max_grad_norm, outputs), Lightning's automatic optimization (precision
    "bf16-mixed") and accelerate (mixed_precision "bf16",
    accelerator.backward), each in a process of its own; prints one JSON
    line per loop: torch's max_memory_allocated and max_memory_reserved over
    the run, the Trainer's optim and max_grad_norm.
"""
import sys


def mode_spike():
    """A 2 GiB allocation held for 50 ms in the middle of a quiet second: the
    sampler (at 10 ms) and the interposer's peak must both see it."""
    import time

    import torch

    torch.empty(1, device="cuda")
    time.sleep(0.5)
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    time.sleep(0.05)
    del x
    torch.cuda.empty_cache()
    time.sleep(0.5)


def mode_gpt2_loop():
    """A GPT-2 training loop that prints its median step time (ms) as JSON:
    the workload of the interposer overhead benchmark (bench/gpu/interposer.sh)."""
    import json, statistics, sys, time

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    cfg = AutoConfig.for_model("gpt2")
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg)
    o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, cfg.vocab_size, (8, 1024), device="cuda")
    times = []
    for i in range(steps + 5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        o.step()
        o.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 5:
            times.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"median_step_ms": statistics.median(times), "steps": steps}))


def mode_scatter():
    """The smallest job that crashed under the interposer on 2 H200s
    (bench/results/parallel-calibration): a NCCL scatter, the first
    point-to-point operation (DTensor's distribute_tensor uses it).
      torchrun --nproc-per-node 2 bench/gpu/jobs/workloads.py scatter"""
    import os
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    x = torch.zeros(1 << 20, device="cuda")
    dist.all_reduce(x)
    parts = [torch.full((1 << 20,), float(i), device="cuda") for i in range(dist.get_world_size())]
    out = torch.empty(1 << 20, device="cuda")
    dist.scatter(out, parts if rank == 0 else None, src=0)
    torch.cuda.synchronize()
    print("rank %d scatter ok %.1f" % (rank, out[0].item()), flush=True)
    dist.destroy_process_group()


def mode_interposer_check():
    """Run under `vramledger run` (the interposer preloaded): at quiet points of
    a GPT-2 training loop, compare the interposer's live bytes with
    torch.cuda.memory_reserved(). One allocator mode per process, chosen by
    PYTORCH_CUDA_ALLOC_CONF (default, expandable_segments:True,
    backend:cudaMallocAsync). Prints one JSON line per quiet point."""
    import ctypes, json, os

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    lib = ctypes.CDLL(None)
    counts = lib.vl_preload_counts  # exported by libvramledger-preload.so
    counts.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64)]


    def live():
        l, p = ctypes.c_uint64(), ctypes.c_uint64()
        counts(ctypes.byref(l), ctypes.byref(p))
        return l.value, p.value


    def point(tag):
        torch.cuda.synchronize()
        l, p = live()
        r = torch.cuda.memory_reserved()
        print(json.dumps({"mode": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default") or "default",
                          "point": tag, "interposer_live": l, "interposer_peak": p, "torch_reserved": r,
                          "torch_max_reserved": torch.cuda.max_memory_reserved(),
                          "diff": l - r}), flush=True)


    def main():
        cfg = AutoConfig.for_model("gpt2")
        with torch.device("cuda"):
            m = AutoModelForCausalLM.from_config(cfg)
        o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
        point("after-model")
        ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")
        for step in range(4):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
            point(f"after-step-{step}")
        del loss
        torch.cuda.empty_cache()
        point("after-empty-cache")


    if __name__ == "__main__":
        main()


def mode_loops():
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


def mode_callbacks():
    """vramledger's training callbacks with the real trainers, on a GPU: a small
    GPT-2 trained 6 steps by transformers' Trainer (TrainerCallback) or by
    Lightning (LightningCallback), under `vramledger run`; the callback's
    logged metrics are written to OUT, for bench/accuracy/compare.py callbacks to compare
    with the run's record.
      vramledger run --out DIR -- python3 bench/gpu/jobs/workloads.py callbacks hf|lightning OUT"""
    import json

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


def mode_unexplained():
    """What holds the bytes the probe's categories do not name? GPT-2 (AMP
    bf16, SDPA, AdamW foreach, batch 8 x 512), PyTorch's allocation history on;
    after the second step's backward, every live block of the caching
    allocator that is not a parameter, gradient or optimizer-state storage is
    listed with its size and the Python frames that allocated it. No probe."""
    import json
    import torch
    from transformers import GPT2Config, AutoModelForCausalLM

    from job_common import known_storages, unknown_blocks

    torch.manual_seed(0)
    torch.cuda.memory._record_memory_history(max_entries=200000, stacks="python")
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(GPT2Config(attn_implementation="sdpa"))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, 50257, (8, 512), device="cuda")
    out = {}
    for step in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        if step == 1:
            rest = unknown_blocks(torch, known_storages(torch, m, opt, ids))
            out = {"memory_allocated": torch.cuda.memory_allocated(),
                   "named_bytes": None, "unnamed_blocks": len(rest),
                   "unnamed_bytes": sum(r["bytes"] for r in rest), "top": rest[:15],
                   "torch": torch.__version__}
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(json.dumps(out))


def mode_unnamed():
    """What the probe's categories leave unnamed, block by block. The probe runs
    in-process (every step sampled); after step 2's forward and after its
    backward, every live block of PyTorch's caching allocator that is not a
    storage the probe named (parameters, gradients, optimizer state, saved
    tensors, outputs) is listed with its size and allocating frames.
    usage: workloads.py unnamed MODEL PRECISION [ckpt]   (models of workloads.py probe)"""
    import json
    import os

    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    os.environ["VRAMLEDGER_PROBE_EVERY"] = "1"
    from vramledger import probe  # noqa: E402
    from job_common import unknown_blocks  # noqa: E402

    model_name, prec = sys.argv[1], sys.argv[2]
    ckpt = len(sys.argv) > 3 and sys.argv[3] == "ckpt"
    open("/tmp/unnamed.jsonl", "w").close()
    p = probe.install(torch, "/tmp/unnamed.jsonl")
    torch.cuda.memory._record_memory_history(max_entries=300000, stacks="python")
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, GPT2Config, LlamaConfig  # noqa: E402

    torch.manual_seed(0)
    cfg = {"gpt2": GPT2Config(), "bert": BertConfig(),
           "llama": LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                                num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)}[model_name]
    with torch.device("cuda"):
        m = (AutoModelForMaskedLM if model_name == "bert" else AutoModelForCausalLM).from_config(cfg)
    if prec == "bf16":
        m.to(torch.bfloat16)
    if ckpt:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")


    def unnamed(where):
        b = p.bill()
        known = set(p.param_keys)
        for key in ("states", "grads"):
            known |= p.cache[key][1]
        known |= {k for ref, k, n, kind in p.saved if ref() is not None}
        known |= {k for ref, k, n in p.outputs if ref() is not None}
        known.add(ids.untyped_storage().data_ptr())
        rest = unknown_blocks(torch, known, frames=6, skip=("vramledger",))
        return {"where": where, "allocated": torch.cuda.memory_allocated(), "bill": b,
                "unnamed_bytes": sum(r["bytes"] for r in rest), "blocks": len(rest), "top": rest[:12]}


    out = []
    for step in range(2):
        if prec == "amp-bf16":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(input_ids=ids, labels=ids).loss
        else:
            loss = m(input_ids=ids, labels=ids).loss
        if step == 1:
            out.append(unnamed("after forward"))
        loss.backward()
        if step == 1:
            out.append(unnamed("after backward"))
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(json.dumps({"model": model_name, "precision": prec, "ckpt": ckpt, "at": out}))


def mode_probe():
    """A Hugging Face training job for the probe's GPU evidence. It
    knows nothing of vramledger: `vramledger run` attaches the probe.

    Prints one JSON line: the tensors' bytes counted independently of the probe
    (numel x element size over parameters and buffers, .grad, optimizer state)
    right after the last optimizer step, the job's own view of
    max_memory_allocated/max_memory_reserved, the losses (bit-exact equality
    with and without the probe), and the median step time (CUDA-synchronised,
    steps after the third).

      --model gpt2|llama|bert  --precision amp-bf16|bf16  [--ckpt] [--lora 16]
      [--compile] [--ddp] [--batch 8 --seq 512 --steps 10] [--oom]"""
    import argparse
    import json
    import os
    import statistics
    import time

    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--precision", default="amp-bf16")
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--lora", type=int, default=0)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--oom", action="store_true", help="ask for too much and report the error")
    ap.add_argument("--unnamed-out", help="after the last step, list every live block that is not a "
                    "parameter, buffer, gradient, optimizer state or the input (allocation history "
                    "on: python frames) into this JSON file")
    a = ap.parse_args()

    if not os.environ.get("PROBE_JOB_NONDETERMINISTIC"):  # bit-exact comparisons
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(0)
    if a.unnamed_out:
        torch.cuda.memory._record_memory_history(max_entries=500000, stacks="python")
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, GPT2Config, LlamaConfig

    if a.model == "gpt2":
        cfg = GPT2Config(attn_implementation=a.attn)
        targets = ["c_attn"]
    elif a.model == "llama":
        cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                          max_position_embeddings=4096, attn_implementation=a.attn)
        targets = ["q_proj", "v_proj"]
    elif a.model == "bert":
        cfg = BertConfig(attn_implementation=a.attn)
        targets = ["query", "value"]
    else:
        sys.exit("unknown model " + a.model)
    with torch.device("cuda"):
        if a.model == "bert":
            model = AutoModelForMaskedLM.from_config(cfg)
        else:
            model = AutoModelForCausalLM.from_config(cfg)
    if a.precision == "bf16":
        model.to(torch.bfloat16)
    if a.ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if a.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=a.lora, lora_alpha=2 * a.lora,
                                                 target_modules=targets, lora_dropout=0.0))
    train = model
    if a.ddp:
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        dist.init_process_group("nccl", rank=0, world_size=1)
        train = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    if a.compile:
        train = torch.compile(train)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    V = cfg.vocab_size
    batch = a.batch * (64 if a.oom else 1)
    ids = torch.randint(0, V, (batch, a.seq), device="cuda")
    losses, times = [], []
    err = None
    try:
        for step in range(a.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if a.precision == "amp-bf16":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = train(input_ids=ids, labels=ids).loss
            else:
                loss = train(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            last = step == a.steps - 1
            if last:
                torch.cuda.synchronize()
                nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
                tensor_bytes = {
                    "parameters": nbytes(list(model.parameters()) + list(model.buffers())),
                    "gradients": nbytes([p.grad for p in model.parameters() if p.grad is not None]),
                    "optimizer_states": nbytes([v for s in opt.state.values() for v in s.values()
                                                if torch.is_tensor(v) and v.is_cuda]),
                }
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    except torch.cuda.OutOfMemoryError:
        err = "OutOfMemoryError"
    if a.unnamed_out:
        torch.cuda.synchronize()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from job_common import known_storages, unknown_blocks
        rest = unknown_blocks(torch, known_storages(torch, model, opt, ids))
        with open(a.unnamed_out, "w") as f:
            json.dump({"model": a.model, "precision": a.precision, "probe": "VRAMLEDGER_PROBE" not in os.environ
                       or os.environ["VRAMLEDGER_PROBE"] != "0",
                       "allocated": torch.cuda.memory_allocated(),
                       "unnamed_bytes": sum(r["bytes"] for r in rest), "blocks": len(rest),
                       "top": rest[:30]}, f, indent=1)
    print(json.dumps({
        "model": a.model, "precision": a.precision, "ckpt": a.ckpt, "lora": a.lora,
        "compile": a.compile, "ddp": a.ddp, "batch": batch, "seq": a.seq, "error": err,
        "losses": losses, "step_s_median": statistics.median(times[3:]) if len(times) > 4 else None,
        "tensor_bytes": None if err else tensor_bytes,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "torch": torch.__version__}))
    if a.ddp:
        torch.distributed.destroy_process_group()


def mode_loops_measure():
    """What the training loops people run keep alive: one bundled config
    (random weights) trained for --steps optimizer steps by a plain loop, the
    Hugging Face Trainer (its own defaults: optimizer, max_grad_norm, outputs),
    Lightning's automatic optimization (precision "bf16-mixed") and
    accelerate (mixed_precision "bf16", accelerator.backward), each in a
    process of its own; prints one JSON line per loop: torch's
    max_memory_allocated and max_memory_reserved over the run, the Trainer's
    optim and max_grad_norm.

        python3 bench/gpu/jobs/workloads.py loops-measure OUT.json MODEL BATCH SEQ [--steps N]"""
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
            p = subprocess.run([sys.executable, __file__, "loops-measure", "--child", loop, model, str(batch), str(seq),
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


MODES = {
    "spike": mode_spike,
    "gpt2-loop": mode_gpt2_loop,
    "scatter": mode_scatter,
    "interposer-check": mode_interposer_check,
    "loops": mode_loops,
    "callbacks": mode_callbacks,
    "unexplained": mode_unexplained,
    "unnamed": mode_unnamed,
    "probe": mode_probe,
    "loops-measure": mode_loops_measure,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s spike|gpt2-loop|scatter|interposer-check|loops|callbacks|unexplained|unnamed|probe|loops-measure [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
