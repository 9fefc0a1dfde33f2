#!/usr/bin/env python3
"""The blocks of PyTorch's caching allocator the probe's categories leave
unnamed (bench/results/probe/), by its first argument:

  unexplained: What holds the bytes the probe's categories do not name? GPT-2
    (AMP bf16, SDPA, AdamW foreach, batch 8 x 512), PyTorch's allocation
    history on; after the second step's backward, every live block of the
    caching allocator that is not a parameter, gradient or optimizer-state
    storage is listed with its size and the Python frames that allocated it.
    No probe.
  unnamed: What the probe's categories leave unnamed, block by block. The
    probe runs in-process (every step sampled); after step 2's forward and
    after its backward, every live block of PyTorch's caching allocator that
    is not a storage the probe named (parameters, gradients, optimizer state,
    saved tensors, outputs) is listed with its size and allocating frames.
    usage: unnamed_blocks.py unnamed MODEL PRECISION [ckpt] (models of probe_job.py)
"""
import sys


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
    usage: unnamed_blocks.py unnamed MODEL PRECISION [ckpt]   (models of probe_job.py)"""
    import json
    import os
    import sys

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


MODES = {"unexplained": mode_unexplained, "unnamed": mode_unnamed}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s unexplained|unnamed [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
