#!/usr/bin/env python3
"""Measure real training steps and generate() calls on a CUDA GPU, for the
calibration of `vramledger estimate` and for `vramledger validate`.

Models are built from bundled configs (data/models) with random weights. For
each training configuration: PyTorch's parameter count, memory_allocated at
phase boundaries, the peak of each phase (forward, backward, optimizer step;
peak statistics reset at each boundary), max_memory_reserved over the step,
the allocator's counters, NVML process memory after the step, and the step
time; the third step is measured after two warm-up steps.

Precision policies as vramledger names them:
  fp32 | amp-bf16 | amp-fp16 (autocast; fp16 with GradScaler) | bf16 | fp16
  (half weights and states) | mixed-bf16 | mixed-fp16 (half weights, fp32
  master copy, fp32 main gradients accumulated by a post-accumulate hook,
  as Megatron-LM does: vramledger --master-grads fp32)

Model families (by the config's model_type; build() and family()):
  causal    every model_type not listed below: AutoModelForCausalLM. Training
            feeds input_ids = labels (batch x seq, random token ids in
            [0, vocab_size)); transformers shifts the labels inside the loss.
            generate(): input_ids (batch x seq prompt), max_new_tokens.
  masked    bert, roberta, distilbert, deberta-v2, modernbert:
            AutoModelForMaskedLM, fed as a causal LM is (input_ids = labels,
            batch x seq, every position a target). No generate().
  seq2seq   t5, bart: AutoModelForSeq2SeqLM. Training feeds input_ids
            (batch x seq) to the encoder and labels (batch x target_seq, the
            entry's target_seq, default seq; random ids in [0, vocab_size));
            the model builds decoder_input_ids by shifting the labels right
            (decoder_start_token_id, pad_token_id of the config).
            generate(): input_ids (batch x seq) to the encoder, the decoder
            makes new_tokens tokens after its start token.
  vision    vit, resnet: AutoModelForImageClassification. "image_size" of an
            entry (else its "seq") is the image side: pixel_values (batch,
            num_channels, side, side), random normal, in the weights' dtype
            (bf16/fp16 under bf16, fp16, mixed-*; fp32 under fp32 and amp-*,
            autocast casting), and labels (batch,) random class ids in
            [0, num_labels). A config with an image_size other than the side
            (ViT: its position embeddings are sized for it) runs with
            interpolate_pos_encoding=True, as transformers requires; ResNet's
            config has none. The record carries image_size
            (`vramledger estimate --image-size SIDE`). No generate().
            ResNet's BatchNorm runs in training mode (model.train()).
attn_implementation (the entry's attention, eager or sdpa) is passed to
from_config for every family except models without attention (resnet: the
entry's attention is recorded but not used). A model that refuses the
requested implementation is an error of that run, never retried with
another one; so is a model that reports another implementation than the one
requested. DeBERTa-v2 and T5 entries use eager (disentangled attention and
relative position bias: sdpa is not expected to be supported).
LoRA targets (lora_targets): none = q_proj,v_proj; "all-linear" as peft
takes it; a comma-separated list of module names ("query_key_value",
"q_proj,kv_b_proj"), which is how the record carries them; or a JSON list.

Suites (data/reference/calibration-set.jsonl, one configuration a line):
calibration (fitted and holdout runs of the estimator's calibration), quick
(a few of them), types (one or two runs of each further model type bundled,
decoders of many families, MoE, MLA, encoders, encoder-decoders, vision), or
names of entries of either set separated by commas.

Devices (--device): cuda (the default) measures. meta or cpu runs the same
job as a dry run, for `vramledger trace` (docs/cmd/trace.md): the model is
built on that device, the inputs are made on the CPU from the same seed and
copied there (a meta tensor copied from the CPU keeps its values for the
tracer), nothing is measured (the record's "measured" holds only what the
job knows: parameters), and a mark `measure` (vramledger.mark) opens the
step the GPU run measures, so `trace --from-mark measure` replays the peak
of that window. Autocast runs on cuda and cpu only (there is none for meta).

Usage: python3 python/vramledger/measure.py OUT.json [--suite calibration|quick|types|NAME,NAME...]
       [--device cuda|meta|cpu]
       python3 python/vramledger/measure.py OUT.json --config '{"model": "llama-2-7b", ...}'
(--config: one training configuration, the fields of a suite entry; the
settings of `vramledger plan --format json`'s best configuration map onto
them: model, precision, optimizer, optimizer_impl, attention,
checkpointing, batch, seq, grad_accum, lora; also target_seq for seq2seq,
image_size for vision)
"""
import argparse, contextlib, datetime, gc, importlib.metadata, json, os, platform, re, sys, time, traceback

import torch

HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Dev:
    """The device the job runs on. On cuda it measures (the allocator's
    statistics); on meta or cpu (a dry run under `vramledger trace`) every
    measurement is None and the tracer sees the allocations."""

    def __init__(self, name, measures=None):
        self.name = name
        self.cuda = name == "cuda" if measures is None else measures  # measures on the GPU

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def allocated(self):
        return torch.cuda.memory_allocated() if self.cuda else None

    def peak(self, reset):
        if not self.cuda:
            return None
        v = torch.cuda.max_memory_allocated()
        if reset:
            torch.cuda.reset_peak_memory_stats()
        return v

    def reset(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def reserved_peak(self):
        return torch.cuda.max_memory_reserved() if self.cuda else None

    def empty_cache(self):
        torch.cuda.empty_cache()  # without CUDA a no-op, and under `trace` an event of the trace

    def generator(self):
        """inputs are drawn on the GPU measured, on the CPU for a dry run"""
        if self.name == "cuda" and not self.cuda:
            return None  # fake CUDA tensors (bench/gpu/jobs/dry_run.py memtracker): no generator for them
        return torch.Generator(device="cuda" if self.cuda else "cpu").manual_seed(0)

    def inputs(self, t):
        return t if t.device.type == self.name else t.to(self.name)

    def mark(self, name):
        """a mark in the dry run's trace (vramledger.mark, when it runs)"""
        if self.cuda:
            return
        try:
            import vramledger
            vramledger.mark(name)
        except Exception:
            pass


DEV = Dev("cuda")


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


def T(name, model, prec, opt, impl, attn, ckpt, b, s, lora=0, holdout=False, targets=None, **extra):
    # extra (target_seq): keys only the entries that give them have, so the
    # calibration entries' records keep exactly their fields
    return dict(name=name, model=model, task="train", precision=prec, optimizer=opt,
                optimizer_impl=impl, attention=attn, checkpointing=ckpt, batch=b, seq=s,
                lora=lora, lora_targets=targets, holdout=holdout, **extra)


def I(name, model, prec, attn, b, prompt, new, holdout=False):
    return dict(name=name, model=model, task="infer", precision=prec, attention=attn, batch=b,
                seq=prompt, new_tokens=new, holdout=holdout)


def load_suites(datadir):
    """The calibration set and the further model types, as data:
    DATA/reference/calibration-set.jsonl, one configuration a line with its
    "set" (calibration or types) and "quick" (in --suite quick). A line's
    other keys are the entry's fields; target_seq and image_size only where
    given, so the records of the calibration entries keep exactly theirs."""
    path = os.path.join(datadir, "reference", "calibration-set.jsonl")
    suites = {"calibration": [], "types": [], "quick": []}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            c = json.loads(line)
            s = c.pop("set", None)
            quick = c.pop("quick", False)
            if s not in ("calibration", "types") or "name" not in c:
                raise SystemExit("%s:%d: a configuration needs \"name\" and \"set\" "
                                 "(calibration or types)" % (path, n))
            suites[s].append(c)
            if quick:
                suites["quick"].append(c["name"])
    names = [c["name"] for c in suites["calibration"] + suites["types"]]
    if len(set(names)) != len(names):
        raise SystemExit("%s: suite names repeat" % path)
    return suites


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")
try:
    _SUITES = load_suites(DATA)
except OSError:  # the package without the program's data: --data names it
    _SUITES = {"calibration": [], "types": [], "quick": []}
CALIBRATION, TYPES, QUICK = _SUITES["calibration"], _SUITES["types"], _SUITES["quick"]

MASKED = ("bert", "roberta", "distilbert", "deberta-v2", "modernbert")
SEQ2SEQ = ("t5", "bart")
VISION = ("vit", "resnet")
NO_ATTENTION = ("resnet",)  # no attn_implementation to choose


def family(model_type):
    """causal | masked | seq2seq | vision: the Auto class and the inputs"""
    if model_type in MASKED:
        return "masked"
    if model_type in SEQ2SEQ:
        return "seq2seq"
    if model_type in VISION:
        return "vision"
    return "causal"


def weight_dtype(prec):
    """the dtype the model is built in: fp32 under fp32 and autocast, else half"""
    return torch.float32 if prec in ("fp32", "amp-bf16", "amp-fp16") else HALF[prec.split("-")[-1]]


def lora_targets(t):
    """peft's target_modules for an entry's lora_targets: a comma-separated
    list of module names becomes a list (peft would take a plain string as a
    regular expression for the whole module path)"""
    if not t:
        return ["q_proj", "v_proj"]
    if isinstance(t, str) and t != "all-linear" and re.fullmatch(r"\w+(,\w+)*", t):
        return t.split(",")
    return t


def nvml_handle(pynvml):
    """The NVML device of torch's current device. NVML numbers every GPU of
    the machine, torch only those CUDA_VISIBLE_DEVICES leaves: match by UUID,
    by index only where torch gives none."""
    i = torch.cuda.current_device()
    try:
        u = str(torch.cuda.get_device_properties(i).uuid)
        return pynvml.nvmlDeviceGetHandleByUUID(u if u.startswith("GPU-") else "GPU-" + u)
    except Exception:
        return pynvml.nvmlDeviceGetHandleByIndex(i)


def nvml_used():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = nvml_handle(pynvml)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return p.usedGpuMemory
    except Exception:
        return None
    return None


def build(c, datadir):
    import transformers
    # the entry's model: a bundled name (data/models/NAME.json), or the path
    # of a config.json (it has a '/' or ends in .json: `vramledger estimate
    # --dry-run` gives the file it read)
    path = c["model"]
    if "/" not in path and not path.endswith(".json"):
        path = os.path.join(datadir, "models", path + ".json")
    with open(path) as f:
        d = json.load(f)
    mt = d.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype"):
        d.pop(k, None)
    cfg = transformers.AutoConfig.for_model(mt, **d)
    dtype = weight_dtype(c["precision"])
    cls = {"causal": transformers.AutoModelForCausalLM, "masked": transformers.AutoModelForMaskedLM,
           "seq2seq": transformers.AutoModelForSeq2SeqLM,
           "vision": transformers.AutoModelForImageClassification}[family(mt)]
    kw = {} if mt in NO_ATTENTION else {"attn_implementation": c["attention"]}
    torch.manual_seed(0)
    try:
        with torch.device(DEV.name):
            m = cls.from_config(cfg, dtype=dtype, **kw)
    except (ValueError, ImportError, NotImplementedError) as ex:
        if not kw:
            raise
        # no retry with another implementation: the run is an error
        raise RuntimeError("%s (model_type %s): from_config(attn_implementation=%r) failed, not retried "
                           "with another attention: %s: %s" % (c["model"], mt, c["attention"],
                                                              type(ex).__name__, ex)) from ex
    got = getattr(m.config, "_attn_implementation", None)
    if kw and isinstance(got, str) and got != c["attention"]:
        raise RuntimeError("%s (model_type %s): attn_implementation %r asked, the model uses %r"
                           % (c["model"], mt, c["attention"], got))
    return m, cfg


def optimizer(params, name, impl):
    kw = {"fused": True} if impl == "fused" else {"foreach": impl == "foreach"}
    if name in ("adam", "adamw"):
        return (torch.optim.Adam if name == "adam" else torch.optim.AdamW)(params, lr=1e-5, **kw)
    if name in ("sgd", "sgd-momentum"):
        kw = {"foreach": impl == "foreach"}
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9 if name == "sgd-momentum" else 0.0, **kw)
    if name == "adafactor":
        return torch.optim.Adafactor(params, lr=1e-3, foreach=impl == "foreach")
    if name == "adam8bit":
        import bitsandbytes as bnb
        return bnb.optim.Adam8bit(params, lr=1e-5)
    raise ValueError(name)


def run_train(c, datadir):
    m, cfg = build(c, datadir)
    n_params = sum(p.numel() for p in m.parameters())
    if c["lora"]:
        from peft import LoraConfig, get_peft_model
        m = get_peft_model(m, LoraConfig(r=c["lora"], lora_alpha=2 * c["lora"], lora_dropout=0.0,
                                          target_modules=lora_targets(c["lora_targets"])))
    if c["checkpointing"] == "full":
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.config.use_cache = False
    m.train()
    prec = c["precision"]
    trainable = [p for p in m.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in trainable)
    mixed = prec.startswith("mixed-")
    if mixed:  # fp32 master copy and fp32 main gradients, Megatron-style
        master = [p.detach().float().clone().requires_grad_(True) for p in trainable]
        for p, mp in zip(trainable, master):
            def hook(param, mp=mp):
                if mp.grad is None:
                    mp.grad = param.grad.float()
                else:
                    mp.grad.add_(param.grad)
                param.grad = None
            p.register_post_accumulate_grad_hook(hook)
        o = optimizer(master, c["optimizer"], c["optimizer_impl"])
    else:
        o = optimizer(trainable, c["optimizer"], c["optimizer_impl"])
    amp = prec.startswith("amp-")
    if amp and DEV.name == "meta":
        raise ValueError("%s: %s needs autocast, which meta tensors do not have: dry-run it on the CPU "
                         "(--device cpu) or trace pure bf16/fp16" % (c["name"], prec))
    amp_dtype = torch.float16 if prec == "amp-fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler(DEV.name) if prec == "amp-fp16" else None
    accum = int(c.get("grad_accum", 1))
    g = DEV.generator()
    gdev = "cuda" if DEV.cuda or g is None else "cpu"
    kind = family(cfg.model_type)
    extra = {}  # what the new input paths add to the record
    if kind == "vision":  # the entry's image_size, else seq, is the image side
        side = int(c.get("image_size") or c["seq"])
        inputs = {"pixel_values": torch.randn((c["batch"], cfg.num_channels, side, side), device=gdev,
                                              dtype=weight_dtype(prec), generator=g),
                  "labels": torch.randint(0, cfg.num_labels, (c["batch"],), device=gdev, generator=g)}
        if getattr(cfg, "image_size", None) not in (None, side):
            # ViT's position table is sized for the config's image_size: another side is
            # refused unless its embeddings are interpolated (modeling_vit.py ViTEmbeddings)
            extra["interpolate_pos_encoding"] = True
        extra.update(image_size=side, num_labels=cfg.num_labels)
    else:
        ids = torch.randint(0, cfg.vocab_size, (c["batch"], c["seq"]), device=gdev, generator=g)
        inputs = {"input_ids": ids, "labels": ids}
        if kind == "seq2seq":  # labels for the decoder; the model shifts them into decoder_input_ids
            tseq = int(c.get("target_seq") or c["seq"])
            inputs["labels"] = torch.randint(0, cfg.vocab_size, (c["batch"], tseq), device=gdev, generator=g)
            extra["target_seq"] = tseq
    inputs = {k: DEV.inputs(v) for k, v in inputs.items()}
    if extra.get("interpolate_pos_encoding"):  # a flag of the forward, not a tensor
        inputs["interpolate_pos_encoding"] = True
    rec = {}
    timed = int(c.get("time_steps", 0))  # steps after the measured one, each timed alone
    times = []
    # the host's own time in forward and in backward() of each timed step:
    # no sync inside, so while the host issues faster than the GPU runs it
    # is the Python, dispatch and launch cost of that pass alone
    host_fw, host_bw = [], []
    for step in range(3 + timed):
        hf = hb = 0.0
        meas = step == 2
        DEV.sync()
        t1 = time.perf_counter()
        if meas:
            DEV.mark("measure")
            DEV.reset()
            rec["before_forward"] = DEV.allocated()
            t0 = time.perf_counter()
        for k in range(accum):  # gradient accumulation: micro-batches, one step
            if k:
                del out, loss
            th = time.perf_counter()
            with torch.autocast(DEV.name, dtype=amp_dtype) if amp else contextlib.nullcontext():
                out = m(**inputs)
            loss = out.loss
            hf += time.perf_counter() - th
            if meas:
                DEV.sync()
                rec["after_forward"] = DEV.allocated()
                rec["peak_forward"] = _max(rec.get("peak_forward"), DEV.peak(True))
            th = time.perf_counter()
            (scaler.scale(loss) if scaler else loss).backward()
            hb += time.perf_counter() - th
            if meas:
                DEV.sync()
                rec["after_backward"] = DEV.allocated()
                rec["peak_backward"] = _max(rec.get("peak_backward"), DEV.peak(True))
        if scaler:
            scaler.step(o)
            scaler.update()
        else:
            o.step()
        if mixed:
            with torch.no_grad():
                for p, mp in zip(trainable, master):
                    p.copy_(mp)
        o.zero_grad(set_to_none=True)
        DEV.sync()
        if meas:
            rec["step_s"] = time.perf_counter() - t0
            rec["after_optimizer"] = DEV.allocated()
            rec["peak_optimizer"] = DEV.peak(False)
            rec["peak_reserved"] = DEV.reserved_peak()
            if DEV.cuda:
                st = torch.cuda.memory_stats()
                rec["allocator"] = {k: st.get(k) for k in (
                    "num_alloc_retries", "num_ooms", "segment.all.peak", "inactive_split_bytes.all.peak",
                    "requested_bytes.all.peak", "reserved_bytes.large_pool.peak",
                    "reserved_bytes.small_pool.peak")}
                rec["nvml_process"] = nvml_used()
        elif step > 2:
            times.append(time.perf_counter() - t1)
            host_fw.append(hf)
            host_bw.append(hb)
        del out, loss
    if times:  # steps with no resets or reads between phases: the step time a user sees
        rec["step_times_s"] = times
        rec["step_median_s"] = sorted(times)[len(times) // 2]
        rec["host_forward_median_s"] = sorted(host_fw)[len(host_fw) // 2]
        rec["host_backward_median_s"] = sorted(host_bw)[len(host_bw) // 2]
    rec["peak_allocated"] = _max(_max(rec["peak_forward"], rec["peak_backward"]), rec["peak_optimizer"])
    rec.update(params=n_params, trainable_params=n_train)
    if kind == "vision":
        rec["images_per_s"] = c["batch"] * accum / rec["step_s"]
    else:  # tokens of the input (the encoder's for seq2seq)
        rec["tokens_per_s"] = c["batch"] * c["seq"] * accum / rec["step_s"]
    rec.update(extra)
    return rec


def run_infer(c, datadir):
    m, cfg = build(c, datadir)
    # from_config on the GPU makes an untied head and frees it when it ties
    # the embeddings (GPT-2, Qwen2, Gemma: 0.15-1 GiB left cached); a model
    # loaded with from_pretrained never holds it, so neither does the
    # measurement
    DEV.empty_cache()
    m.eval()
    n_params = sum(p.numel() for p in m.parameters())
    kind = family(cfg.model_type)
    if kind not in ("causal", "seq2seq"):
        raise ValueError("%s (model_type %s): generate() is measured for decoders and seq2seq models only"
                         % (c["model"], cfg.model_type))
    # seq2seq: the prompt goes to the encoder, the decoder starts from
    # decoder_start_token_id and makes new_tokens tokens
    pad = 0
    if kind == "seq2seq" and getattr(cfg, "pad_token_id", None) is not None:
        pad = cfg.pad_token_id
    if DEV.cuda:
        ids = torch.randint(0, cfg.vocab_size, (c["batch"], c["seq"]), device="cuda")
    else:
        ids = DEV.inputs(torch.randint(0, cfg.vocab_size, (c["batch"], c["seq"]), generator=DEV.generator()))
    rec = {}
    # on the GPU the second call is measured, the cache warm from the first;
    # a dry run makes one call (the same allocations), the mark before it
    calls = 2 if DEV.cuda else 1
    for k in range(calls):
        DEV.sync()
        if k == calls - 1:
            DEV.mark("measure")
        DEV.reset()
        before = DEV.allocated()
        t0 = time.perf_counter()
        with torch.no_grad():
            m.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=c["new_tokens"],
                       min_new_tokens=c["new_tokens"], do_sample=False, pad_token_id=pad)
        DEV.sync()
        rec = {"before": before, "peak_allocated": DEV.peak(False), "peak_reserved": DEV.reserved_peak(),
               "nvml_process": nvml_used() if DEV.cuda else None,
               "seconds": time.perf_counter() - t0, "params": n_params}
    return rec


def run_child(name, datadir):
    """measure one configuration of the suite in a new Python process"""
    import subprocess
    import tempfile
    fd, path = tempfile.mkstemp(prefix="vl-measure-", suffix=".json")
    os.close(fd)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), path, "--suite", name,
                            "--data", datadir, "--in-process", "--device", DEV.name])
        try:
            with open(path) as f:
                run = json.load(f)["runs"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return {"error": "the measuring process for %s exited with status %d and wrote no "
                             "result" % (name, p.returncode)}
        return {k: run[k] for k in ("measured", "error") if k in run}
    finally:
        os.unlink(path)


def entry_of_config(c):
    """an entry from the fields of --config (a dict): a training entry, or
    with "task": "infer" a generate() entry (batch, seq = the prompt,
    new_tokens). LoRA without lora_targets on a model given as a config
    file takes peft's default modules for its model_type, as `vramledger
    estimate` does (a bundled name keeps the suite's q_proj,v_proj)."""
    name, task = c.get("name", "config"), c.get("task", "train")
    if task == "infer":
        return I(name, c["model"], c.get("precision", "bf16"), c.get("attention", "sdpa"), int(c["batch"]),
                 int(c["seq"]), int(c["new_tokens"]), holdout=bool(c.get("holdout", False)))
    if task != "train":
        raise ValueError("--config: task %r is neither train nor infer" % (task,))
    targets = c.get("lora_targets")
    model = c["model"]
    if int(c.get("lora", 0)) and not targets and ("/" in model or model.endswith(".json")):
        try:
            from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as peft_default
            with open(model) as f:
                mt = json.load(f).get("model_type")
            if peft_default.get(mt):
                targets = ",".join(peft_default[mt])
        except (ImportError, OSError, ValueError):
            pass  # no peft: the run fails where it imports it, and says so
    e = T(name, model, c.get("precision", "amp-bf16"), c.get("optimizer", "adamw"),
          c.get("optimizer_impl", "foreach"), c.get("attention", "sdpa"), c.get("checkpointing", "none"),
          int(c["batch"]), int(c["seq"]), lora=int(c.get("lora", 0)), targets=targets,
          holdout=bool(c.get("holdout", False)))
    e["grad_accum"] = int(c.get("grad_accum", 1))
    if c.get("time_steps"):
        e["time_steps"] = int(c["time_steps"])
    if c.get("target_seq"):
        e["target_seq"] = int(c["target_seq"])
    if c.get("image_size"):
        e["image_size"] = int(c["image_size"])
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--suite", default="calibration")
    ap.add_argument("--config", help="one training configuration as JSON (instead of --suite)")
    ap.add_argument("--configs", help="a JSON Lines file of training configurations (as --config), "
                                      "measured in this process one after another")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--in-process", action="store_true",
                    help="measure every configuration in this process (by default each runs in a "
                         "process of its own)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "meta", "cpu"),
                    help="cuda measures; meta or cpu is a dry run for vramledger trace")
    a = ap.parse_args()
    global DEV
    DEV = Dev(a.device)
    if a.config:
        todo = [entry_of_config(json.loads(a.config))]
    elif a.configs:
        with open(a.configs) as f:
            todo = [entry_of_config(json.loads(line)) for line in f if line.strip()]
    else:
        suites = load_suites(a.data)
        cal, types = suites["calibration"], suites["types"]
        if a.suite == "calibration":
            todo = cal
        elif a.suite == "quick":
            todo = [c for c in cal if c["name"] in suites["quick"]]
        elif a.suite == "types":
            todo = types
        else:
            names = set(a.suite.split(","))
            todo = [c for c in cal + types if c["name"] in names]
    import transformers
    res = {"schema": "vramledger.measure/1",
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "host": platform.node(),
           "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(0) if DEV.cuda else a.device,
           "device_total_bytes": torch.cuda.mem_get_info()[1] if DEV.cuda else None, "suite": a.suite,
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "runs": []}
    # versions from the installed metadata: importing peft to read its
    # __version__ costs seconds (it imports accelerate and every tuner) in a
    # run that may never use it
    for mod in ("peft", "bitsandbytes"):
        try:
            res[mod] = importlib.metadata.version(mod)
        except Exception:
            res[mod] = None
    try:
        import pynvml
        pynvml.nvmlInit()
        res["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        res["driver"] = None
    # Each configuration in a process of its own: blocks an earlier run leaves
    # (a cuBLAS workspace carved out of a large cached segment) pin segments
    # that empty_cache() cannot return, and a later run's reservation and
    # process memory count them (measured: GPT-2 generate() reserved 1.57 GiB
    # after the training runs, 0.93 GiB alone; 
    # bench/results/generate-reserve/). A run that crashes its process is reported as an error.
    isolate = not a.in_process and not a.config and not a.configs and len(todo) > 1
    # read by vramledger validate: after the first, a run's reserved and
    # process memory are not its own
    res["in_process"] = not isolate and len(todo) > 1
    for c in todo:
        e = dict(c)
        t0 = time.time()
        if isolate:
            e.update(run_child(c["name"], a.data))
        else:
            try:
                e["measured"] = (run_train if c["task"] == "train" else run_infer)(c, a.data)
            except Exception as ex:
                e["error"] = repr(ex)[:500]
                traceback.print_exc()
            gc.collect()
            DEV.empty_cache()
        e["wall_s"] = round(time.time() - t0, 2)
        print(json.dumps({k: e.get(k) for k in ("name", "wall_s", "error")},), flush=True)
        res["runs"].append(e)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    # a job that failed is never a number: under `vramledger trace` the
    # replay of a run that stopped says so by this status
    if any(e.get("error") for e in res["runs"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
