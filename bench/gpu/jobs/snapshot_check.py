"""memory_viz files on the H200: `vramledger run --snapshot-at peak|exit` of a
small GPT-2 training job (the probe's dumps of torch.cuda.memory._snapshot()),
and `vramledger trace --replay --snapshot` of the same job's trace; each
loaded by PyTorch's own torch.cuda._memory_viz (segment_plot and trace_plot:
the pages pytorch.org/memory_viz draws), the run's dumps also read back by
the C side through `python -m vramledger.history` and replayed.
  python3 bench/gpu/jobs/snapshot_check.py VL OUT   -> OUT/snapshot-check.json"""
import glob
import json
import os
import pickle
import subprocess
import sys

import torch.cuda._memory_viz as mv

vl, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
job = [sys.executable, "-c", """
import torch, transformers
torch.manual_seed(0)
m = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=4096)).cuda()
o = torch.optim.AdamW(m.parameters())
for i in range(4):
    x = torch.randint(0, 4096, (8, 128), device='cuda')
    m(input_ids=x, labels=x).loss.backward(); o.step(); o.zero_grad(set_to_none=True)
print(torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
"""]
res = {}
for at in ("peak", "exit"):
    d = os.path.join("/tmp", "snap-" + at)
    p = subprocess.run([vl, "run", "--quiet", "--out", d, "--snapshot-at", at, "--"] + job,
                       capture_output=True, text=True)
    files = sorted(glob.glob(os.path.join(d, "*_snapshot_pid*.pickle")))
    r = {"rc": p.returncode, "stdout": p.stdout.strip(), "files": [os.path.basename(f) for f in files]}
    if files:
        snap = pickle.load(open(files[-1], "rb"))
        r["segments"] = len(snap["segments"])
        r["segment_plot_bytes"] = len(mv.segment_plot(snap))
        r["trace_plot_bytes"] = len(mv.trace_plot(snap))
        h = subprocess.run([sys.executable, "-m", "vramledger.history", files[-1]], capture_output=True,
                           text=True)
        r["history"] = h.stderr.strip()[-400:]
        tr = os.path.join(out, at + ".hist.trace")
        open(tr, "w").write(h.stdout)
        rp = subprocess.run([vl, "trace", "--replay", tr, "--format", "json"], capture_output=True, text=True)
        r["replay"] = json.loads(rp.stdout)["replays"][0] if rp.returncode == 0 else rp.stderr[-300:]
        os.remove(tr)
    res["run-" + at] = r
# the trace of the same job, and its replay as a snapshot
d = "/tmp/snap-trace"
p = subprocess.run([vl, "trace", "--out", d, "--format", "json"] + ["--"] + job, capture_output=True, text=True)
snapf = os.path.join(out, "trace-replay.pickle")
rp = subprocess.run([vl, "trace", "--replay", os.path.join(d, "alloc.trace"), "--format", "json",
                     "--snapshot", snapf], capture_output=True, text=True)
r = {"rc": rp.returncode, "stderr": rp.stderr[-300:]}
if rp.returncode == 0:
    snap = pickle.load(open(snapf, "rb"))
    r["segments"] = len(snap["segments"])
    r["replay"] = json.loads(rp.stdout)["replays"][0]
    r["segment_plot_bytes"] = len(mv.segment_plot(snap))
    r["trace_plot_bytes"] = len(mv.trace_plot(snap))
res["trace-snapshot"] = r
json.dump(res, open(os.path.join(out, "snapshot-check.json"), "w"), indent=1)
print(json.dumps(res)[:3000])
