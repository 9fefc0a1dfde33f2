"""A user's own job traced on meta tensors, on the stack CI installs: a plain
nn.TransformerEncoder LM, a conv net with BatchNorm, LoRA through peft,
gradient checkpointing, generate() and accelerate's loop
(tests/python/stack/jobs.py). `vramledger trace` must run each through
(complete, exit 0), its peak must hold at least the job's own model states,
and the meta trace must be the CPU trace of the same job (docs/cmd/trace.md:
a meta dry run stands for the device run), peak allocated within 1 %.
accelerate's Accelerator places the model itself: traced on the CPU only.

usage: test_jobs.py KIND   ($VRAMLEDGER_BIN, $VRAMLEDGER_PYTHON)"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def trace(kind, device, tmp):
    out = os.path.join(tmp, "%s-%s.json" % (kind, device))
    run = os.path.join(tmp, "run-" + device)
    p = subprocess.run([os.environ["VRAMLEDGER_BIN"], "trace", "--out", run, "--format", "json", "--",
                        os.environ["VRAMLEDGER_PYTHON"], os.path.join(HERE, "jobs.py"), kind, device, out],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("%s on %s: trace exited %d:\n%s%s" % (kind, device, p.returncode, p.stdout[-1500:],
                                                       p.stderr[-2500:]))
    text = p.stdout[p.stdout.index("{\n"):]
    t = json.loads(text)
    assert t["complete"] and t["job_exit_status"] == 0, (kind, device, t["caveats"])
    job = json.load(open(out))
    peak = t["replays"][0]["peak_allocated_bytes"]
    assert peak >= job["floor_bytes"], "%s on %s: peak %d under the model states' %d" % (
        kind, device, peak, job["floor_bytes"])
    print("%s on %s: peak allocated %d B (model states at least %d B), caveats %s"
          % (kind, device, peak, job["floor_bytes"], t["caveats"]))
    if kind == "convnet":
        convnet_ops(os.path.join(run, "alloc.trace"), device)
    if kind == "encoder_lm":
        loss_ops(os.path.join(run, "alloc.trace"), device)
    return peak


def convnet_ops(path, device):
    """the trace's op lines of a conv net (optrace.py conv()): each
    convolution an implicit GEMM forward and, backward, the weight's and
    (but for the first, whose input needs none) the input's; the two
    3 x 3 ones' NHWC transposes as inner=1 lines (identical lines are one
    line with a count); BatchNorm in its own classes"""
    ops = [ln.split(" ", 5)[5] for ln in open(path) if ln.startswith("# op 3 ")]
    def have(*words):
        return sum(1 for o in ops if all(w in o for w in words))
    assert have("gemm convolution layout=fwd") == 2, (device, ops)
    assert have("gemm convolution_backward layout=wgrad") == 2, (device, ops)
    assert have("gemm convolution_backward layout=dgrad") == 1, (device, ops)
    assert have("mem convolution ", "class=cast", "inner=1") == 2, (device, ops)
    assert have("mem convolution_backward ", "class=cast", "inner=1") == 2, (device, ops)
    assert have("class=bnorm ") >= 1 and have("class=bnorm_bwd") >= 1, (device, ops)


def loss_ops(path, device):
    """cross_entropy's kernels (optrace.py): log_softmax and its backward in
    classes of their own; nll_loss's backward writes zeros of the
    log-probabilities' size and scatters a value a row, reading nothing of
    that size (its bytes the gradient's and the targets', a fill: class
    ew), its forward gathers a value a row"""
    lines = [ln.split() for ln in open(path) if ln.startswith("# op ")]
    def mem(name):
        got = [dict(w.split("=", 1) for w in x[7:] if "=" in w) for x in lines if x[5] == "mem" and x[6] == name]
        assert got, (device, name, "no line")
        return got[0]
    assert mem("_log_softmax")["class"] == "logsoftmax", (device, mem("_log_softmax"))
    assert mem("_log_softmax_backward_data")["class"] == "logsoftmax_bwd", device
    b = mem("nll_loss_backward")
    grad = int(b["numel"]) * 4
    assert b["class"] == "ew" and grad <= int(b["bytes"]) < 1.1 * grad, (device, b)
    assert int(mem("nll_loss_forward")["bytes"]) < 0.1 * grad, device


def main():
    kind = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cpu = trace(kind, "cpu", tmp)
        if kind == "accelerate":
            return
        meta = trace(kind, "meta", tmp)
        if abs(meta / cpu - 1) > 0.01:
            sys.exit("%s: meta peak %d B, CPU peak %d B: %+.2f %%" % (kind, meta, cpu, 100 * (meta / cpu - 1)))


if __name__ == "__main__":
    main()
