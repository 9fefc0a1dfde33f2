#!/usr/bin/env python3
"""How far the generic Llama-like reading of a model type nobody described
is from what the model allocates: for each causal-LM type of the installed
transformers that `estimate` does not describe but whose config has the
usual keys, its configuration class's defaults with 4 layers (lists of one
entry a layer cut to 4), then `vramledger estimate --dry-run` on meta
tensors, which reports the formula's peaks beside the dry run's. Two jobs a
type: full bf16 training with AdamW, and LoRA (rank 16 on q_proj, v_proj)
with full checkpointing, batch 2 x 512 tokens. One JSON line a job.

  python3 bench/accuracy/generic_types.py VRAMLEDGER OUT.jsonl [TYPE ...]
(run with the Python that has torch and transformers; VRAMLEDGER_PYTHON
set to it)"""
import json, os, subprocess, sys, tempfile

from transformers import AutoConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

NEED = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size"]
JOBS = {"full-bf16": ["--precision", "bf16"],
        "lora16-ckpt": ["--precision", "bf16", "--lora-rank", "16", "--lora-targets",
                        "q_proj,v_proj", "--checkpointing", "full"]}


def described(exe):
    """the model types the estimator reads (a config without one is told them)"""
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    tmp.write("{}")
    tmp.close()
    p = subprocess.run([exe, "estimate", "--model", tmp.name], capture_output=True, text=True)
    os.unlink(tmp.name)
    return set(x.strip() for x in p.stderr.split("supported:")[1].split(","))


def config(t):
    d = AutoConfig.for_model(t).to_dict()
    if any(d.get(k) is None for k in NEED) or d.get("is_encoder_decoder"):
        return None
    L = d["num_hidden_layers"]
    for k, v in list(d.items()):
        if isinstance(v, list) and len(v) == L and L > 4:
            d[k] = v[:4]
    d["num_hidden_layers"] = 4
    d["model_type"] = t
    return d


def main():
    exe, out = sys.argv[1], sys.argv[2]
    known = described(exe)
    types = sys.argv[3:] or sorted(t for t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES if t not in known)
    with open(out, "a") as f:
        for t in types:
            try:
                d = config(t)
            except Exception:  # a config class that cannot be built from its defaults
                d = None
            if d is None:
                continue
            path = os.path.join(tempfile.gettempdir(), "generic-%s.json" % t)
            json.dump(d, open(path, "w"))
            for job, flags in JOBS.items():
                args = [exe, "estimate", "--model", path, "--batch", "2", "--seq", "512", *flags,
                        "--dry-run", "--format", "json"]
                p = subprocess.run(args, capture_output=True, text=True, timeout=900)
                row = {"type": t, "job": job}
                try:
                    e = json.loads(p.stdout)
                    dr = e["dry_run"]
                    row.update(approximate=e.get("approximate"),
                               formula_allocated=e["peak_allocated_bytes"],
                               formula_reserved=e["peak_reserved_bytes"],
                               dry_allocated=dr["peak_allocated_bytes"],
                               dry_reserved=dr["peak_reserved_bytes"],
                               complete=dr.get("complete"))
                except (ValueError, KeyError, TypeError):
                    row["error"] = (p.stderr or "no output").strip().splitlines()[-1][:300]
                print(json.dumps(row), file=f, flush=True)
                print(t, job, row.get("error") or "%+.2f %% alloc, %+.2f %% reserved" % (
                    100.0 * (row["formula_allocated"] / row["dry_allocated"] - 1),
                    100.0 * (row["formula_reserved"] / row["dry_reserved"] - 1)), flush=True)


if __name__ == "__main__":
    main()
