#!/bin/sh
# report's speed on a 1 GiB record: a synthetic record of 8 GPUs sampled
# every 100 ms (with processes, the interposer's alloc lines and marks
# between, as `vramledger run` writes them) grown past 1 GiB, then
# `vramledger report` timed in its formats (wall seconds and peak RSS);
# the target is under 30 s (bench/results/speed/README.md#report-1gib).
#   sh bench/speed/report-1gib.sh [VRAMLEDGER]
set -eu
vl=${1:-build-release/vramledger}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run"
python3 - "$tmp/run/record.jsonl" <<'P'
import sys
G = 1 << 30
with open(sys.argv[1], "w", buffering=1 << 24) as f:
    f.write('{"type":"meta","schema":"vramledger.run/1","t_ns":0,"start_unix_ms":1764547200000,'
            '"command":["torchrun","--nproc-per-node","8","train.py"],"host":"node-a",'
            '"interval_ms":100,"nvml":"ok","driver":"580.159.04","gpus":[%s]}\n' % ",".join(
                '{"index":%d,"name":"NVIDIA H200","uuid":"GPU-%04d","total_bytes":150109880320}'
                % (g, g) for g in range(8)))
    n = 0
    while f.tell() < 1 << 30:
        t = n * 100000000
        used = 20 * G + (n % 600) * (8 << 20)  # a sawtooth: a step's growth, then freed
        gpus = ",".join('{"i":%d,"used":%d,"tree":%d,"util":97}' % (g, used + G, used)
                        for g in range(8))
        procs = ",".join('{"pid":%d,"gpu":%d,"bytes":%d}' % (100 + g, g, used) for g in range(8))
        f.write('{"type":"sample","t_ns":%d,"gpus":[%s],"procs":[%s],"tree_bytes":%d,'
                '"tree_procs":8,"other_bytes":0,"cuda_alloc_bytes":%d}\n'
                % (t, gpus, procs, 8 * used, 8 * (used - G)))
        if n % 10 == 0:
            for g in range(8):
                f.write('{"type":"alloc","t_ns":%d,"pid":%d,"live":%d,"peak":%d,"allocs":%d,'
                        '"frees":%d,"pools":0,"libs":{"libc10_cuda.so":%d}}\n'
                        % (t + 1000 + g, 100 + g, used - G, used - G, n, n, used - G))
            f.write('{"type":"mark","t_ns":%d,"pid":100,"name":"step"}\n' % (t + 2000))
        n += 1
    f.write('{"type":"exit","t_ns":%d,"status":0,"samples":%d}\n' % (n * 100000000, n))
    print("%d samples, %.2f GiB" % (n, f.tell() / G))
P
for fmt in json text; do
  /usr/bin/time -f "report --format $fmt: %e s wall, %M KiB peak RSS" \
    "$vl" report "$tmp/run" --format "$fmt" >"$tmp/out.$fmt"
done
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('read back: samples %d, peak process_bytes %d' % (d['samples'], d['peak']['process_bytes']))
" "$tmp/out.json"
