#!/bin/sh
# `vramledger run` and `report` at the interposer's and the reader's limits:
# more allocating processes than counter slots (said once on stderr, a
# `lost` event, report's finding no-slot), and a record over 64 MiB (read
# whole, streamed).
# Usage: run_limits.sh VRAMLEDGER TABLE_TEST PRELOAD STUB_DIR
set -u
vl=$1 prog=$2 pre=$3 stub=$4
. "$(dirname "$0")/../cli/checks.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_PRELOAD="$pre" LD_LIBRARY_PATH="$stub" VRAMLEDGER_NVML_LIB=/nonexistent

# 300 processes allocate 1 MiB each, 50 more never do: 256 slots
"$vl" run --out "$tmp/slots" --quiet -- "$prog" slots-child 300 50 \
  > "$tmp/slots.out" 2> "$tmp/slots.err"
check "slots: the job's status" test $? -eq 0
check "slots: 256 slots taken, 256 MiB in them" grep -q "^256 slots taken, 256 MiB in them" "$tmp/slots.out"
check "slots: said once on the job's stderr" \
  test "$(grep -c 'every counter slot is taken' "$tmp/slots.err")" -eq 1
check "slots: the record's lost event" \
  grep -q '"type":"lost".*"no_slot_procs":44' "$tmp/slots/record.jsonl"
"$vl" report "$tmp/slots" > "$tmp/slots.report" 2>&1
check "slots: report's finding" grep -q '\[no-slot\] 44 processes of the job allocated' "$tmp/slots.report"

# a record of 8 GPUs at 100 ms past 64 MiB (2.1 hours of them)
mkdir "$tmp/big"
python3 - "$tmp/big/record.jsonl" <<'PY'
import sys
G = 1 << 30
with open(sys.argv[1], "w") as f:
    f.write('{"type":"meta","schema":"vramledger.run/1","t_ns":0,"interval_ms":100,"nvml":"ok",'
            '"command":["python","train.py"]}\n')
    filler = "x" * (48 << 10)
    n = 0
    while f.tell() < 66 << 20:
        gpus = ",".join('{"i":%d,"used":%d,"tree":%d}' % (g, 20 * G, 20 * G) for g in range(8))
        peak = 8 * 20 * G + (G if n == 5000 else 0)
        f.write('{"type":"sample","t_ns":%d,"gpus":[%s],"tree_bytes":%d,"tree_procs":8,'
                '"other_bytes":0,"cuda_alloc_bytes":0}\n' % (n * 100000000, gpus, peak))
        if n % 10 == 0:
            f.write('{"type":"x-later","text":"%s"}\n' % filler)
        n += 1
    f.write('{"type":"exit","t_ns":%d,"status":0}\n' % (n * 100000000))
PY
check "big: the record is over 64 MiB" test "$(wc -c < "$tmp/big/record.jsonl")" -gt 67108864
"$vl" report --format json "$tmp/big" > "$tmp/big.json" 2> "$tmp/big.err"
check "big: report reads it" test $? -eq 0
check "big: its peak, at 500 s" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
p = d['peak']
sys.exit(0 if p['process_bytes'] == 161 << 30 and abs(p['process_t_s'] - 500) < 1e-6 else 1)
" "$tmp/big.json"

echo "$n checks, $fail failed"
test "$fail" -eq 0
