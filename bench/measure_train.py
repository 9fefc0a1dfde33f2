#!/usr/bin/env python3
"""Measure real training steps and generate() calls on a GPU, for comparison
with `vramledger estimate` (bench/compare_estimate.py). Models are built from
the bundled configs with random weights.

For each configuration: PyTorch's parameter count, memory_allocated at the
phase boundaries (before forward, after forward, after backward, after the
optimizer step), max_memory_allocated and max_memory_reserved over one steady
step (after two warm-up steps), NVML process memory at the peak's end, and
the step time. Writes JSON to argv[1]; argv[2:] selects configurations by name.

    python3 bench/measure_train.py $OUT/train.json
"""
import datetime, gc, json, os, platform, sys, time, traceback

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

try:
    import pynvml
    pynvml.nvmlInit()
except Exception:  # no NVML: the figure is recorded as null
    pynvml = None

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "amp-bf16": torch.float32}

CONFIGS = [
    # name, model, task, precision, optimizer, impl, attention, ckpt, batch, seq, extra
    ("gpt2-fp32-adamw-sdpa", "gpt2", "train", "fp32", "adamw", "foreach", "sdpa", "none", 8, 1024, {}),
    ("gpt2-amp-adamw-eager", "gpt2", "train", "amp-bf16", "adamw", "foreach", "eager", "none", 8, 1024, {}),
    ("qwen05-amp-adamw-sdpa", "qwen2-0.5b", "train", "amp-bf16", "adamw", "foreach", "sdpa", "none", 4, 1024, {}),
    ("qwen05-bf16-adamw-fused", "qwen2-0.5b", "train", "bf16", "adamw", "fused", "sdpa", "none", 4, 2048, {}),
    ("pythia14-amp-adamw-sdpa", "pythia-1.4b", "train", "amp-bf16", "adamw", "foreach", "sdpa", "none", 4, 1024, {}),
    ("opt350-fp32-sgdm-eager", "opt-350m", "train", "fp32", "sgd-momentum", "foreach", "eager", "none", 8, 512, {}),
    ("bert-amp-adamw-sdpa", "bert-base-uncased", "train", "amp-bf16", "adamw", "foreach", "sdpa", "none", 16, 512, {}),
    ("gemma2b-amp-adamw-ckpt", "gemma-2b", "train", "amp-bf16", "adamw", "foreach", "sdpa", "full", 4, 2048, {}),
    ("mistral7b-bf16-adamw-ckpt", "mistral-7b", "train", "bf16", "adamw", "fused", "sdpa", "full", 2, 2048, {}),
    ("llama7b-bf16-lora16", "llama-2-7b", "train", "bf16", "adamw", "foreach", "sdpa", "none", 2, 2048, {"lora": 16}),
    ("llama7b-bf16-infer", "llama-2-7b", "infer", "bf16", None, None, "sdpa", "none", 8, 512, {"new": 128}),
    ("qwen05-bf16-infer", "qwen2-0.5b", "infer", "bf16", None, None, "sdpa", "none", 16, 1024, {"new": 256}),
]


def nvml_used():
    if pynvml is None:
        return None
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return p.usedGpuMemory
    except Exception:
        return None
    return None


def build(model, precision, attention):
    with open(f"data/models/{model}.json") as f:
        d = json.load(f)
    mt = d.pop("model_type")
    d.pop("architectures", None)
    d.pop("torch_dtype", None)
    cfg = AutoConfig.for_model(mt, **d)
    cfg._attn_implementation = attention
    cls = AutoModelForMaskedLM if mt == "bert" else AutoModelForCausalLM
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = cls.from_config(cfg, torch_dtype=DTYPES[precision], attn_implementation=attention)
    return m, cfg


def make_optimizer(params, name, impl):
    kw = {}
    if impl == "fused":
        kw["fused"] = True
    elif impl == "forloop":
        kw["foreach"] = False
    else:
        kw["foreach"] = True
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-5, **kw)
    if name == "sgd-momentum":
        kw.pop("fused", None)
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9, **kw)
    if name == "sgd":
        kw.pop("fused", None)
        return torch.optim.SGD(params, lr=1e-5, **kw)
    raise ValueError(name)


def run_train(c):
    name, model, task, prec, opt, impl, attn, ckpt, b, s, extra = c
    m, cfg = build(model, prec, attn)
    n_params = sum(p.numel() for p in m.parameters())
    if extra.get("lora"):
        from peft import LoraConfig, get_peft_model
        m = get_peft_model(m, LoraConfig(r=extra["lora"], lora_alpha=32, lora_dropout=0.0,
                                          target_modules=["q_proj", "v_proj"]))
    if ckpt == "full":
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.config.use_cache = False
    m.train()
    trainable = [p for p in m.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in trainable)
    o = make_optimizer(trainable, opt, impl)
    V = cfg.vocab_size
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, V, (b, s), device="cuda", generator=g)
    labels = ids.clone()
    amp = prec == "amp-bf16"
    rec = {}
    times = []
    for step in range(3):
        measure = step == 2
        torch.cuda.synchronize()
        if measure:
            torch.cuda.reset_peak_memory_stats()
            rec["before_forward"] = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            out = m(input_ids=ids, labels=labels)
        loss = out.loss
        if measure:
            torch.cuda.synchronize()
            rec["after_forward"] = torch.cuda.memory_allocated()
            rec["peak_forward"] = torch.cuda.max_memory_allocated()
        loss.backward()
        if measure:
            torch.cuda.synchronize()
            rec["after_backward"] = torch.cuda.memory_allocated()
            rec["peak_through_backward"] = torch.cuda.max_memory_allocated()
        o.step()
        o.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if measure:
            rec["after_optimizer"] = torch.cuda.memory_allocated()
            rec["peak_allocated"] = torch.cuda.max_memory_allocated()
            rec["peak_reserved"] = torch.cuda.max_memory_reserved()
            rec["nvml_process"] = nvml_used()
        del out, loss
    rec.update({"params": n_params, "trainable_params": n_train, "step_s": times[-1],
                "tokens_per_s": b * s / times[-1]})
    del m, o
    return rec


def run_infer(c):
    name, model, task, prec, opt, impl, attn, ckpt, b, s, extra = c
    m, cfg = build(model, prec, attn)
    m.eval()
    n_params = sum(p.numel() for p in m.parameters())
    ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
    rec = {}
    for step in range(2):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        with torch.no_grad():
            m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=extra["new"],
                       min_new_tokens=extra["new"], do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
        rec = {"before": before, "peak_allocated": torch.cuda.max_memory_allocated(),
               "peak_reserved": torch.cuda.max_memory_reserved(), "nvml_process": nvml_used(),
               "seconds": time.perf_counter() - t0, "params": n_params}
    del m
    return rec


def main():
    want = set(sys.argv[2:])
    res = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "host": platform.node(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(0),
           "driver": pynvml.nvmlSystemGetDriverVersion() if pynvml else None,
           "method": "random-init models from data/models; 2 warm-up steps, third step measured; "
                     "zero_grad(set_to_none=True); labels = input_ids (HF causal-LM loss)",
           "runs": []}
    try:
        import peft
        res["peft"] = peft.__version__
    except ImportError:
        res["peft"] = None
    for c in CONFIGS:
        if want and c[0] not in want:
            continue
        name, model, task, prec, opt, impl, attn, ckpt, b, s, extra = c
        entry = {"name": name, "model": model, "task": task, "precision": prec, "optimizer": opt,
                 "optimizer_impl": impl, "attention": attn, "checkpointing": ckpt, "batch": b, "seq": s,
                 "extra": extra}
        t0 = time.time()
        try:
            entry["measured"] = (run_train if task == "train" else run_infer)(c)
        except Exception as e:
            entry["error"] = repr(e)
            traceback.print_exc()
        gc.collect()
        torch.cuda.empty_cache()
        entry["wall_s"] = time.time() - t0
        print(json.dumps(entry), flush=True)
        res["runs"].append(entry)
        with open(sys.argv[1], "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
