#!/usr/bin/env python3
"""Where a training step's time goes, kernel by kernel: one step of each
configuration of a JSON Lines file (measure.py's entries) under
torch.profiler after three warm-up steps; per run the CUDA time by kernel
(top 25), the kernel count, the step's wall time and the host's time in
aten ops.

  PYTHONPATH=python python3 bench/time/step_profile.py CONFIGS.jsonl OUT.json [--set=NAME]

--set=NAME: only the lines whose "set" is NAME (bench/configs/time-profile.jsonl:
steps, ckpt, vision)."""
import contextlib, json, sys, time
import torch
sys.path.insert(0, "python")
from vramledger import measure  # noqa: E402

measure.DEV = measure.Dev("cuda")
out = []
only = [x.split("=", 1)[1] for x in sys.argv[3:] if x.startswith("--set=")]
for line in open(sys.argv[1]):
    if not line.strip() or (only and json.loads(line).get("set") != only[0]):
        continue
    c = measure.entry_of_config(json.loads(line))
    rec = {"name": c["name"]}
    try:
        m, cfg = measure.build(c, "data")
        if c.get("lora"):
            import peft
            m = peft.get_peft_model(m, peft.LoraConfig(r=c["lora"], lora_alpha=2 * c["lora"], lora_dropout=0.0,
                                                       target_modules=measure.lora_targets(c.get("lora_targets"))))
        if c.get("checkpointing") == "full":
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.train()
        params = [p for p in m.parameters() if p.requires_grad]
        o = measure.optimizer(params, c["optimizer"], c["optimizer_impl"])
        kind = measure.family(cfg.model_type)
        if kind == "vision":  # measure.py's inputs: the image side, labels per image
            side = int(c.get("image_size") or c["seq"])
            inputs = {"pixel_values": torch.randn((c["batch"], cfg.num_channels, side, side), device="cuda",
                                                  dtype=measure.weight_dtype(c["precision"])),
                      "labels": torch.randint(0, cfg.num_labels, (c["batch"],), device="cuda")}
            if getattr(cfg, "image_size", None) not in (None, side):
                inputs["interpolate_pos_encoding"] = True
        else:
            ids = torch.randint(0, cfg.vocab_size, (c["batch"], c["seq"]), device="cuda")
            inputs = {"input_ids": ids, "labels": ids}
            if kind == "seq2seq":  # the decoder's own tokens
                tseq = int(c.get("target_seq") or c["seq"])
                inputs["labels"] = torch.randint(0, cfg.vocab_size, (c["batch"], tseq), device="cuda")
        amp = c["precision"].startswith("amp-")
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16) if amp else contextlib.nullcontext():
                loss = m(**inputs).loss
            loss.backward()
            o.step()
            o.zero_grad(set_to_none=True)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            rec["wall_s"] = time.perf_counter() - t0
        ka = prof.key_averages()
        kern = [(e.key, e.device_time_total / 1e6, e.count) for e in ka if e.device_time_total > 0 and e.device_type.name == "CUDA"]
        kern.sort(key=lambda x: -x[1])
        rec["cuda_s"] = sum(k[1] for k in kern)
        rec["kernels"] = sum(k[2] for k in kern)
        rec["top"] = kern[:25]
        ops = [(e.key, e.cpu_time_total / 1e6, e.count, e.device_time_total / 1e6) for e in ka if e.key.startswith("aten::")]
        ops.sort(key=lambda x: -x[3])
        rec["aten_top"] = ops[:25]
        rec["aten_calls"] = sum(e.count for e in ka if e.key.startswith("aten::"))
        m = o = None
    except Exception as ex:
        rec["error"] = repr(ex)[:300]
    torch.cuda.empty_cache()
    out.append(rec)
    print(rec["name"], rec.get("wall_s"), rec.get("cuda_s"), rec.get("kernels"), rec.get("error", ""), flush=True)
    json.dump(out, open(sys.argv[2], "w"), indent=0)
