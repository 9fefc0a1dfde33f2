#!/usr/bin/env python3
"""Training jobs of measured sweeps for `vramledger fit` (bench/results/sweep-
fit/), by their first argument:

  point: One point of a sweep: GPT-2 (random init) trained for a few steps at
    --batch x --seq, AMP bf16, AdamW foreach, eager attention (so memory grows
    with seq^2); or with --model llama a Llama-shaped model (8 layers, hidden
    1024, GQA 16/4, vocab 32000) with SDPA. Prints PyTorch's peaks as JSON.
    Run under `vramledger sweep` (bench/results/trace/).
  grid: A real sweep for `vramledger fit`: for one model and settings, train
    steps over a batch x seq grid in one process (the model is built once),
    and write CSV rows batch,seq,peak_bytes,status (peak allocated over the
    third step). A point that runs out of memory is 'oom'.
"""
import sys


def mode_point():
    """One point of a sweep: GPT-2 (random init) trained for a few steps at
    --batch x --seq, AMP bf16, AdamW foreach, eager attention (so memory grows
    with seq^2); or with --model llama a Llama-shaped model (8 layers, hidden
    1024, GQA 16/4, vocab 32000) with SDPA. Prints PyTorch's peaks as JSON. Run under `vramledger sweep`
    (bench/results/trace/)."""
    import argparse, json, os, sys

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import vramledger  # mark("step"): steps and tokens per second in the sweep

    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--model", default="gpt2")
    a = ap.parse_args()
    if a.model == "llama":
        cfg = AutoConfig.for_model("llama", hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                                   num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                   max_position_embeddings=4096, attn_implementation="sdpa")
    else:
        cfg = AutoConfig.for_model("gpt2", attn_implementation="eager")
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = AutoModelForCausalLM.from_config(cfg)
    o = torch.optim.AdamW(m.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
    for _ in range(a.steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        o.step()
        o.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        vramledger.mark("step")
    print(json.dumps({"batch": a.batch, "seq": a.seq,
                      "max_allocated": torch.cuda.max_memory_allocated(),
                      "max_reserved": torch.cuda.max_memory_reserved()}))


def mode_grid():
    """A real sweep for `vramledger fit`: for one model and
    settings, train steps over a batch x seq grid in one process (the model is
    built once), and write CSV rows batch,seq,peak_bytes,status (peak
    allocated over the third step). A point that runs out of memory is 'oom'.

        python3 bench/gpu/jobs/sweep_jobs.py grid OUT.csv MODEL PRECISION ATTENTION B1,B2.. S1,S2.."""
    import csv, gc, os, sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
    import torch
    from vramledger import measure  # the suite's model builder and optimizer

    out, model, prec, attn, batches, seqs = sys.argv[1:7]
    datadir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "data")
    c = {"model": model, "precision": prec, "attention": attn}
    m, cfg = measure.build(c, datadir)
    m.train()
    opt = measure.optimizer([p for p in m.parameters() if p.requires_grad], "adamw", "foreach")
    amp = prec.startswith("amp-")
    rows = []
    for b in [int(x) for x in batches.split(",")]:
        for s in [int(x) for x in seqs.split(",")]:
            status, peak = "ok", 0
            try:
                ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
                for step in range(3):
                    if step == 2:
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                        out_ = m(input_ids=ids, labels=ids)
                    out_.loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    del out_
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated()
            except torch.cuda.OutOfMemoryError:
                status = "oom"
            gc.collect()
            torch.cuda.empty_cache()
            rows.append((b, s, peak, status))
            print(b, s, peak, status, flush=True)
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["batch", "seq", "peak_bytes", "status"])
        w.writerows(rows)


MODES = {"point": mode_point, "grid": mode_grid}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in MODES:
        sys.exit("usage: %s point|grid [ARGS...]" % sys.argv[0])
    MODES[sys.argv.pop(1)]()
