"""trace --gpu prices the traced job's own ops with estimate's cost model
(docs/cmd/trace.md, "Step time"): where estimate describes the same job,
the two op lists are the same kernels, so the two step times must agree.
The job is python/vramledger/measure.py's (the script the step-time suite
measured), traced on meta tensors; estimate prices the bundled config with
the same flags. Tolerance 5 %: what is left between the two lists is what
each counts that the other does not (the rotary tables, the masks, the
gradient's zeros; bench/results/step-time/trace/README.md). A change of
either side's op list, or of one op's price, that moves one of them by
more fails here.

usage: test_trace_time.py CASE   ($VRAMLEDGER_BIN, $VRAMLEDGER_PYTHON set by ctest)"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURE = os.path.join(HERE, "..", "..", "..", "python", "vramledger", "measure.py")
CASES = {
    # an encoder in fp32 (memory-efficient attention, CUDA cores' GEMMs)
    "bert_fp32": {"model": "bert-base-uncased", "precision": "fp32", "optimizer": "sgd-momentum",
                  "optimizer_impl": "forloop", "attention": "sdpa", "checkpointing": "none",
                  "batch": 32, "seq": 128},
    # a decoder in bf16 (cuDNN attention, causal), full fine-tuning
    "qwen2_bf16": {"model": "qwen2-0.5b", "precision": "bf16", "optimizer": "adamw",
                   "optimizer_impl": "foreach", "attention": "sdpa", "checkpointing": "none",
                   "batch": 4, "seq": 2048},
    # the same with full checkpointing: the layers' forward again inside backward.
    # The backward is dispatch-bound here, and the two price a dispatch on
    # different counts: the trace each ATen call (13.4 us, from jobs run each
    # in a process of its own; a recomputed one 1.85 times that), estimate
    # each op it enumerates (39.8 us, one for several calls, from tiny models
    # run in one process). The step is held to 20 % (-17.3 % now; measured
    # alone on the H200, Qwen2-0.5B eager checkpointed at 8 x 1,024: trace
    # -5.4 %, estimate -17.0 %, bench/results/step-time/trace/
    # isolated-h200.jsonl), the device time to 5 % (-1.7 %)
    "qwen2_ckpt": {"model": "qwen2-0.5b", "precision": "bf16", "optimizer": "adamw",
                   "optimizer_impl": "foreach", "attention": "sdpa", "checkpointing": "full",
                   "batch": 4, "seq": 2048},
}
TOLERANCE = 0.05
# Qwen2-0.5B's forward is the host's in estimate (1,142 enumerated ops at
# 39.8 us, 45 ms) and the device's in the trace (1,918 ATen calls at 13.4
# us, 26 ms, under the forward's kernels): its step is held to 10 % (-7.3 %
# now), its device time to 5 % (-0.9 %)
STEP_TOLERANCE = {"qwen2_ckpt": 0.20, "qwen2_bf16": 0.10}
CARD = "h100-80gb"


def main():
    case = sys.argv[1]
    c = dict(CASES[case], time_steps=0)
    exe = os.environ["VRAMLEDGER_BIN"]
    py = os.environ.get("VRAMLEDGER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([exe, "trace", "--gpu", CARD, "--format", "json", "--out", os.path.join(d, "run"),
                            "--", py, MEASURE, os.path.join(d, "out.json"), "--in-process", "--device", "meta",
                            "--config", json.dumps(c)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("%s: trace exited %d:\n%s" % (case, p.returncode, p.stderr[-3000:]))
    t = json.loads(p.stdout)
    assert t.get("step_seconds"), "%s: trace --gpu gave no step time" % case
    assert t["time"]["steps"] >= 3 and t["time"]["step_complete"], t["time"]
    assert t["tokens_per_second"] and t["tokens_per_second"] > 0
    assert t["time"]["optimizer"] == ("sgd-momentum" if c["optimizer"] == "sgd-momentum" else "adamw")
    rec = t["time"]["phase_ops"]["recompute"]
    assert (rec > 0) == (c["checkpointing"] == "full"), "%s: %d recomputed ops" % (case, rec)
    f = ["--model", c["model"], "--batch", str(c["batch"]), "--seq", str(c["seq"]), "--precision", c["precision"],
         "--optimizer", c["optimizer"], "--optimizer-impl", c["optimizer_impl"], "--attention", c["attention"],
         "--checkpointing", c["checkpointing"], "--gpu", CARD, "--margin", "0", "--format", "json"]
    e = subprocess.run([exe, "estimate", *f], capture_output=True, text=True, timeout=120)
    if e.returncode != 0:
        sys.exit("%s: estimate exited %d:\n%s" % (case, e.returncode, e.stderr[-2000:]))
    est = json.loads(e.stdout)
    ts, es = t["step_seconds"], est["step_seconds"]
    print("%s: trace %.4f s, estimate %.4f s (%+.1f %%); by kind trace %s, estimate %s" % (
        case, ts, es, 100 * (ts / es - 1),
        {k: round(v, 4) for k, v in t["time"]["kind_seconds"].items()},
        {k: round(v, 4) for k, v in est["time"]["kind_seconds"].items()}))
    tol = STEP_TOLERANCE.get(case, TOLERANCE)
    if abs(ts / es - 1) > tol:
        sys.exit("%s: trace's step %.4f s is %+.1f %% from estimate's %.4f s (tolerance %.0f %%)"
                 % (case, ts, 100 * (ts / es - 1), es, 100 * tol))
    # the same kernels: the matmuls' time and the whole device time (every
    # kind but the host's) within the tolerance too
    tk, ek = t["time"]["kind_seconds"], est["time"]["kind_seconds"]
    for what, tm, em in (("matmuls", tk["matmul"], ek["matmul"]),
                         ("device time", sum(v for k, v in tk.items() if k != "host"),
                          sum(v for k, v in ek.items() if k != "host"))):
        if abs(tm / em - 1) > TOLERANCE:
            sys.exit("%s: trace's %s %.4f s are %+.1f %% from estimate's %.4f s"
                     % (case, what, tm, 100 * (tm / em - 1), em))


if __name__ == "__main__":
    main()
