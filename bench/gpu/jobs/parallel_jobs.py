#!/usr/bin/env python3
"""Training jobs over several GPUs, one process per GPU under torchrun (bench/gpu/ddp.sh, parallel.sh; bench/results/ddp-rebuild/, parallel-calibration/, unseen-sets/), one by its first argument:

  data: A data-parallel training job, one process per GPU (torchrun): GPT-2
    (124 M, random init), AMP bf16, AdamW, under DDP, DDP with a
    ZeroRedundancyOptimizer (ZeRO-1), FSDP FULL_SHARD (ZeRO-3) or FSDP
    SHARD_GRAD_OP (ZeRO-2). Every rank prints one JSON line: its
    max_memory_allocated/reserved and its median step time.
  tensor: A tensor-parallel training job, one process per GPU (torchrun): a
    Hugging Face causal LM built from a config file (random weights), its
    linears split the Megatron way with PyTorch's DTensor
    (torch.distributed.tensor.parallel): q/k/v and gate/up column-wise, o and
    down row-wise, the embedding and the LM head split over the vocabulary,
    the loss computed on the vocabulary-split logits (loss_parallel). Norms
    and the residual stream stay replicated, or with --sp are split over the
    sequence (sequence parallelism: the norms SequenceParallel, attention and
    MLP gather their input, o and down reduce-scatter their output, as
    PyTorch's recipe for Llama). Every rank prints one JSON line: its
    max_memory_allocated/ reserved, its median step time.
  pipeline: A pipeline-parallel training job, one process per stage
    (torchrun): GPT-2 (random init, transformers' blocks) split into as many
    stages as ranks, the first with the embeddings, the last with the final
    norm and the head (untied: the stages are on different GPUs), run by
    torch.distributed.pipelining (Schedule1F1B or ScheduleGPipe) in bf16 with
    AdamW. Every rank prints one JSON line: its max_memory_allocated/reserved
    and its median step time.
  rebuild-trials: DDP's bucket rebuild, many times over: does the second step
    hold the first step's buckets as well as the rebuilt ones?
"""
import sys


def mode_data():
    """A data-parallel training job, one process per GPU (torchrun):
    GPT-2 (124 M, random init), AMP bf16, AdamW, under DDP, DDP with a ZeroRedundancyOptimizer
    (ZeRO-1), FSDP FULL_SHARD (ZeRO-3) or FSDP SHARD_GRAD_OP (ZeRO-2). Every rank prints one JSON line:
    its max_memory_allocated/reserved and its median step time.

      torchrun --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py data --mode ddp|ddp-static|ddp-bucket-view|zero1|fsdp-full|fsdp-grad-op
          [--model gpt2|gpt2-medium | --config FILE] [--batch 4 --seq 512 --steps 5]"""
    import argparse
    import json
    import os
    import statistics
    import time

    import torch
    import torch.distributed as dist

    from job_common import config_from_file, history_start, history_write, init_distributed

    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="ddp")
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--config", help="a config.json (data/models/ or bench/configs/) instead of --model")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds to wait after each step (a data loader's gap; DDP's two peaks)")
    ap.add_argument("--pause-first", type=float, default=0.0,
                    help="synchronize and wait this long once, after the first step (doctor's "
                         "VL-D015 fix: NCCL's watchdog releases DDP's first buckets)")
    ap.add_argument("--async-loop", action="store_true",
                    help="no synchronize after each step (the host runs ahead, as most training "
                         "loops); step_s_median is then the mean over steps 3.. after a final sync")
    ap.add_argument("--history", help="rank 0 writes what is live at its peak here (bench/gpu/jobs/job_common.py summary())")
    ap.add_argument("--history-all", action="store_true",
                    help="every rank records, from before the model is built (rank r writes PATH-rank<r>.json)")
    a = ap.parse_args()
    rank, local, world = init_distributed()
    if a.history_all:
        history_start(a.history, rank, True)
    torch.manual_seed(0)
    from transformers import AutoConfig, AutoModelForCausalLM

    if a.config:
        cfg = config_from_file(a.config)
        a.model = os.path.basename(a.config)
    elif a.model == "gpt2-medium":
        cfg = AutoConfig.for_model("gpt2", n_embd=1024, n_layer=24, n_head=16)
    else:
        cfg = AutoConfig.for_model("gpt2")
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg)
    if a.mode.startswith("ddp") or a.mode == "zero1":
        # ddp-static: static_graph=True (buckets built once, never rebuilt);
        # ddp-bucket-view: gradient_as_bucket_view=True (gradients are views
        # into the buckets, no second copy)
        train = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local], static_graph=a.mode == "ddp-static",
            gradient_as_bucket_view=a.mode == "ddp-bucket-view")
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        # one FSDP unit per transformer block (the classes transformers keeps whole)
        blocks = {type(m) for m in model.modules() if type(m).__name__ in model._no_split_modules}
        strategy = ShardingStrategy.FULL_SHARD if a.mode == "fsdp-full" else ShardingStrategy.SHARD_GRAD_OP
        train = FSDP(model, sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy(blocks),
                     device_id=local, use_orig_params=True)
    if a.mode == "zero1":  # PyTorch's ZeRO-1: DDP with the optimizer's states sharded
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(train.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        opt = torch.optim.AdamW(train.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1 + rank)
    gd = torch.Generator(device="cuda").manual_seed(1 + rank)
    if not a.history_all:
        history_start(a.history, rank)
    times = []
    for step in range(a.steps):
        if a.async_loop:  # made on the GPU: a host batch's .cuda() waits for the GPU
            ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=gd, device="cuda")
        else:
            ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).cuda()
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = train(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not a.async_loop:
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        elif step == 2:
            t_async = t0
        if a.pause > 0:
            time.sleep(a.pause)
        if step == 0 and a.pause_first > 0:
            torch.cuda.synchronize()
            time.sleep(a.pause_first)
    if a.async_loop:
        torch.cuda.synchronize()
        if a.steps > 2:
            times = [(time.perf_counter() - t_async) / (a.steps - 2)] * 3
    history_write(a.history, rank, a.history_all)
    print(json.dumps({"mode": a.mode, "model": a.model, "world": world, "rank": rank,
                      "batch": a.batch, "seq": a.seq, "pause": a.pause, "pause_first": a.pause_first,
                      "async_loop": a.async_loop,
                      "max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved(),
                      "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
          flush=True)
    dist.destroy_process_group()


def mode_tensor():
    """A tensor-parallel training job, one process per GPU
    (torchrun): a Hugging Face causal LM built from a config file (random
    weights), its linears split the Megatron way with PyTorch's DTensor
    (torch.distributed.tensor.parallel): q/k/v and gate/up column-wise, o and
    down row-wise, the embedding and the LM head split over the vocabulary, the
    loss computed on the vocabulary-split logits (loss_parallel). Norms and the
    residual stream stay replicated, or with --sp are split over the sequence
    (sequence parallelism: the norms SequenceParallel, attention and MLP gather
    their input, o and down reduce-scatter their output, as PyTorch's recipe
    for Llama). Every rank prints one JSON line: its max_memory_allocated/
    reserved, its median step time.

      torchrun --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py tensor --config FILE
          [--precision amp-bf16|bf16|fp32] [--attention sdpa|eager]
          [--checkpointing none|full] [--sp] [--batch 4 --seq 1024 --steps 5]"""
    import argparse
    import json
    import os
    import statistics
    import time

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from job_common import config_from_file, history_start, history_write, init_distributed

    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--precision", default="amp-bf16")
    ap.add_argument("--attention", default="sdpa")
    ap.add_argument("--checkpointing", default="none")
    ap.add_argument("--sp", action="store_true", help="sequence parallelism over the TP group")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--history", help="rank 0 writes what is live at its peak here (bench/gpu/jobs/job_common.py summary())")
    a = ap.parse_args()
    rank, local, world = init_distributed()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel, loss_parallel,
                                                   parallelize_module)
    from transformers import AutoModelForCausalLM

    mesh = init_device_mesh("cuda", (world,))
    cfg = config_from_file(a.config)
    cfg.attn_implementation = a.attention
    cfg._attn_implementation = a.attention
    cfg.use_cache = False
    torch.manual_seed(0)  # every rank the same weights before the split
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=a.attention)
    if a.precision in ("bf16",):
        model.to(torch.bfloat16)
    if a.checkpointing == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    seq_out = Shard(1) if a.sp else Replicate()
    for layer in model.model.layers:
        plan = {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(output_layouts=seq_out),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=seq_out),
        }
        if a.sp:
            plan.update({
                "input_layernorm": SequenceParallel(), "post_attention_layernorm": SequenceParallel(),
                "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                desired_input_kwarg_layouts={"hidden_states": Replicate()}),
                "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            })
        parallelize_module(layer, mesh, plan)
    top = {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq_out),
        "lm_head": ColwiseParallel(input_layouts=seq_out, output_layouts=Shard(-1), use_local_output=False),
    }
    if a.sp:
        top["model.norm"] = SequenceParallel()
    parallelize_module(model, mesh, top)
    # foreach kernels take one kind of tensor at a time: split parameters (DTensor)
    # and replicated ones (norms) into two groups; same update
    split = [p for p in model.parameters() if hasattr(p, "to_local")]
    whole = [p for p in model.parameters() if not hasattr(p, "to_local")]
    opt = torch.optim.AdamW([{"params": split}, {"params": whole}], lr=1e-4)
    torch.cuda.reset_peak_memory_stats()
    g = torch.Generator().manual_seed(1)  # every rank the same batch
    history_start(a.history, rank)
    times = []
    for step in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision.startswith("amp")):
            # positions of the whole sequence: under --sp the embeddings' output
            # is this rank's slice of it, from which transformers would count
            pos = torch.arange(a.seq, device="cuda")
            hidden = model.model(input_ids=ids, position_ids=pos[None], cache_position=pos).last_hidden_state
            logits = model.lm_head(hidden)
        # transformers' ForCausalLMLoss: fp32 logits, labels shifted by padding
        labels = F.pad(ids, (0, 1), value=-100)[..., 1:]
        with loss_parallel():
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100)
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    history_write(a.history, rank)
    print(json.dumps({"mode": "tp-sp" if a.sp else "tp", "config": os.path.basename(a.config), "world": world, "rank": rank,
                      "precision": a.precision, "attention": a.attention,
                      "checkpointing": a.checkpointing, "batch": a.batch, "seq": a.seq,
                      "loss": float(loss.item()),
                      "local_params": sum(p.to_local().numel() if hasattr(p, "to_local") else p.numel()
                                          for p in model.parameters()),
                      "max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved(),
                      "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
          flush=True)
    dist.destroy_process_group()


def mode_pipeline():
    """A pipeline-parallel training job, one process per stage
    (torchrun): GPT-2 (random init, transformers' blocks) split into as many
    stages as ranks, the first with the embeddings, the last with the final
    norm and the head (untied: the stages are on different GPUs), run by
    torch.distributed.pipelining (Schedule1F1B or ScheduleGPipe) in bf16 with
    AdamW. Every rank prints one JSON line: its max_memory_allocated/reserved
    and its median step time.

      torchrun --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py pipeline [--model gpt2|gpt2-medium]
          [--schedule 1f1b|gpipe] [--batch 8 --micro 4 --seq 512 --steps 5]

    --batch is the global batch of one step, split into --micro micro-batches
    (the estimate's --batch is the micro-batch, --grad-accum the count)."""
    import argparse
    import json
    import statistics
    import time

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from job_common import history_start, history_write, init_distributed

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--schedule", default="1f1b")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--micro", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--history", help="every rank writes what is live at its peak (PATH, PATH-rank1.json; "
                                      "bench/gpu/jobs/job_common.py summary())")
    a = ap.parse_args()
    rank, local, world = init_distributed()
    torch.manual_seed(0)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from transformers import AutoConfig, AutoModelForCausalLM

    if a.model == "gpt2-medium":
        cfg = AutoConfig.for_model("gpt2", n_embd=1024, n_layer=24, n_head=16)
    else:
        cfg = AutoConfig.for_model("gpt2")
    full = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)  # on the CPU
    blocks = full.transformer.h
    per = (len(blocks) + world - 1) // world
    mine = blocks[rank * per:(rank + 1) * per]


    def hidden(out):
        return out[0] if isinstance(out, tuple) else out


    class Stage(torch.nn.Module):
        def __init__(self, full):
            super().__init__()
            self.first, self.last = rank == 0, rank == world - 1
            if self.first:
                self.wte, self.wpe, self.drop = full.transformer.wte, full.transformer.wpe, full.transformer.drop
            self.h = torch.nn.ModuleList(mine)
            if self.last:
                self.ln_f = full.transformer.ln_f
                self.head = torch.nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, dtype=torch.bfloat16)
                self.head.weight.data.copy_(full.lm_head.weight.data)

        def forward(self, x):
            if self.first:
                pos = torch.arange(x.shape[1], device=x.device)
                x = self.drop(self.wte(x) + self.wpe(pos))
            for b in self.h:
                x = hidden(b(x))
            if self.last:
                x = self.head(self.ln_f(x))
            return x


    def loss_fn(logits, labels):  # as transformers' ForCausalLMLoss: shifted, fp32
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())


    dev = torch.device("cuda", local)
    history_start(a.history, rank, True)
    mod = Stage(full).to(dev)
    del full
    stage = PipelineStage(mod, rank, world, dev)
    sched = (Schedule1F1B if a.schedule == "1f1b" else ScheduleGPipe)(stage, a.micro, loss_fn=loss_fn)
    opt = torch.optim.AdamW(mod.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    times = []
    for step in range(a.steps):
        ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), generator=g).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if rank == 0:
            sched.step(ids)
        elif rank == world - 1:
            sched.step(target=ids, losses=[])
        else:
            sched.step()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    history_write(a.history, rank, True)
    print(json.dumps({"mode": "pp-" + a.schedule, "model": a.model, "world": world, "rank": rank,
                      "layers": len(mine), "batch": a.batch, "micro": a.micro, "seq": a.seq,
                      "max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved(),
                      "step_s_median": statistics.median(times[2:]) if len(times) > 2 else None}),
          flush=True)
    dist.destroy_process_group()


def mode_rebuild_trials():
    """DDP's bucket rebuild, many times over: does the second step
    hold the first step's buckets as well as the rebuilt ones?

    DDP builds its gradient buckets in parameter order, and after the first
    step rebuilds them in the order the gradients arrived (_rebuild_buckets,
    from _pre_forward, with a broadcast of the new bucket order). The first
    buckets were the inputs of the first step's all-reduces; ProcessGroupNCCL
    keeps a reference to every collective's inputs (its "stash", for the
    allocator's safety) until its watchdog thread sees the collective finished
    (it looks every 100 ms) *and* a later collective is enqueued from the main
    thread. If the watchdog has not looked between the first step's last
    all-reduce finishing and the rebuild's broadcast, the first buckets live on
    until the second step's first all-reduce, in its backward: past the
    activation peak, which then holds both bucket sets.

    So the prediction: the second set is held with probability about
    1 - gap / 100 ms, where gap is the time from the first step's gradients
    being reduced on the GPU to the host reaching the second forward.

    Each trial builds the model anew in a fresh allocator (empty_cache), wraps
    it in DDP with a new AdamW, runs two steps, and reports per rank:
      gap_ms   GPU time from the end of step 1's backward (all-reduces waited
               on) to the start of step 2 (sync and host loops: the GPU is
               idle when the host records it)
      jump_b   bytes allocated right after DDP's _pre_forward in step 2 minus
               just before it: 0 when the first buckets were freed at the
               rebuild, the bucket bytes when they were kept
      step2_peak_b  max_memory_allocated() over step 2 alone
    Configurations are interleaved trial by trial, so drift in the machine
    falls on all of them alike.

      torchrun --nproc-per-node 2 bench/gpu/jobs/parallel_jobs.py rebuild-trials --trials 20       --loops sync:0,sync:0.02,async:0 [--model gpt2 | --config FILE]
      (--smoke: CPU, gloo, a tiny model: checks the script, measures nothing)"""
    import argparse
    import gc
    import json
    import os
    import time

    import torch
    import torch.distributed as dist

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--config", help="a config.json instead of --model gpt2")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--loops", default="sync:0",
                    help="comma-separated LOOP:PAUSE_S; LOOP sync (synchronize after each "
                         "step, as bench/gpu/jobs/parallel_jobs.py data), host (no synchronize, the batch "
                         "copied from the host, which waits for the GPU: most loops) or async (no "
                         "synchronize, the batch made on the GPU: the host runs ahead)")
    ap.add_argument("--tag", default="", help="copied into every line (e.g. an env setting)")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cuda = not a.smoke
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")


    def build():
        if a.smoke:
            m = torch.nn.Sequential(torch.nn.Embedding(100, 32), torch.nn.Linear(32, 32),
                                    torch.nn.Linear(32, 100)).to(dev)
            return m, 100
        from transformers import AutoConfig, AutoModelForCausalLM
        if a.config:
            sys_path = os.path.dirname(os.path.abspath(__file__))
            import sys
            sys.path.insert(0, sys_path)
            from job_common import config_from_file
            cfg = config_from_file(a.config)
        else:
            cfg = AutoConfig.for_model("gpt2")
        with dev:
            m = AutoModelForCausalLM.from_config(cfg)
        return m, cfg.vocab_size


    def loss_of(train, ids):
        if a.smoke:
            out = train(ids)
            return torch.nn.functional.cross_entropy(out.view(-1, out.shape[-1]), ids.view(-1))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return train(input_ids=ids, labels=ids).loss


    def allocated():
        return torch.cuda.memory_allocated() if cuda else 0


    def sync():
        if cuda:
            torch.cuda.synchronize()


    def event():
        if not cuda:
            return None
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e


    def trial(loop, pause, n):
        torch.manual_seed(0)
        model, vocab = build()
        train = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local] if cuda else None)
        opt = torch.optim.AdamW(train.parameters(), lr=1e-4)
        g = torch.Generator().manual_seed(1 + rank)
        gd = torch.Generator(device=dev).manual_seed(1 + rank) if cuda else None
        seen = {}

        def pre(_mod, _args):  # runs after DDP's _pre_forward (the rebuild)
            seen["after_pre"] = allocated()

        hook = model.register_forward_pre_hook(pre)
        marks = {}
        for step in (1, 2):
            if loop == "async" and cuda:
                # made on the GPU: a host tensor's .to() would wait for the GPU
                ids = torch.randint(0, vocab, (a.batch, a.seq), generator=gd, device=dev)
            else:
                ids = torch.randint(0, vocab, (a.batch, a.seq), generator=g).to(dev)
            if step == 2:
                marks["start"] = event()
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                before = allocated()
            loss = loss_of(train, ids)
            loss.backward()
            if step == 1:
                marks["bwd_end"] = event()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if loop == "sync":
                sync()
            if pause > 0:
                time.sleep(pause)
        sync()
        hook.remove()
        line = {"model": "tiny (smoke)" if a.smoke else a.config and os.path.basename(a.config) or a.model, "tag": a.tag,
                "loop": loop, "pause": pause, "trial": n, "rank": rank, "world": world,
                "batch": a.batch, "seq": a.seq,
                "gap_ms": (marks["bwd_end"].elapsed_time(marks["start"])
                           if cuda and loop != "async" else None),
                "jump_b": seen["after_pre"] - before,
                "step2_peak_b": torch.cuda.max_memory_allocated() if cuda else None,
                "grad_b": sum(p.numel() * p.element_size() for p in model.parameters()),
                "loss": float(loss)}
        print(json.dumps(line), flush=True)
        del train, opt, model, loss
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
        dist.barrier()


    loops = []
    for spec in a.loops.split(","):
        loop, pause = spec.split(":")
        if loop not in ("sync", "host", "async"):
            raise SystemExit("--loops: %r is not sync, host or async" % loop)
        loops.append((loop, float(pause)))
    for n in range(a.trials):
        for loop, pause in loops:
            trial(loop, pause, n)
    dist.destroy_process_group()


MODES = {"data": mode_data, "tensor": mode_tensor, "pipeline": mode_pipeline, "rebuild-trials": mode_rebuild_trials}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s data|tensor|pipeline|rebuild-trials [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
