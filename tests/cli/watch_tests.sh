#!/bin/sh
# `vramledger watch` against a fake NVML: CSV, JSON Lines, textfile, the
# Prometheus endpoint, a clean stop on TERM, and no NVML.
set -u
vl=$1 fake=$2 http=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_NVML_LIB="$fake" FAKE_NVML_GPUS=2 FAKE_NVML_PROCS="$tmp/procs"
echo "4242 1073741824 1" >"$tmp/procs"
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...

"$vl" watch --count 3 --interval-ms 10 --csv "$tmp/g.csv"
check "csv: exit 0 after --count" [ $? = 0 ]
check "csv: header + 3 samples x (2 GPUs + 1 process)" [ "$(wc -l <"$tmp/g.csv")" = 10 ]
check "csv: the process row" grep -q '^[0-9]*,1,"Fake GPU 1","GPU-fake-0001",141000000000,2147483648,51,4242,1073741824$' "$tmp/g.csv"
"$vl" watch --count 2 --interval-ms 10 --csv "$tmp/g.csv"
check "csv: appending adds no second header" [ "$(grep -c '^t_unix_ms' "$tmp/g.csv")" = 1 ]

"$vl" watch --count 2 --interval-ms 10 --jsonl "$tmp/g.jsonl"
check "jsonl: one line per sample" [ "$(wc -l <"$tmp/g.jsonl")" = 2 ]
check "jsonl: processes by GPU" grep -q '"index":1,"name":"Fake GPU 1".*"procs":\[{"pid":4242,"bytes":1073741824}\]' "$tmp/g.jsonl"

"$vl" watch --count 1 --textfile "$tmp"
check "textfile: written" grep -q 'vramledger_process_memory_used_bytes{gpu="1",uuid="GPU-fake-0001",pid="4242"} 1073741824' "$tmp/vramledger.prom"
check "textfile: no temporary left" sh -c "! ls '$tmp' | grep -q tmp"

"$vl" watch --prometheus-port 0 --interval-ms 50 2>"$tmp/err" &
pid=$!
port=""
for i in 1 2 3 4 5 6 7 8 9 10; do
  port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/err")
  [ -n "$port" ] && break
  sleep 0.1
done
sleep 0.2
"$http" "$port" /metrics >"$tmp/metrics"
check "prometheus: 200 with the exposition" grep -q "^HTTP/1.0 200" "$tmp/metrics"
check "prometheus: content type 0.0.4" grep -q "version=0.0.4" "$tmp/metrics"
check "prometheus: used bytes per GPU" grep -q 'vramledger_gpu_memory_used_bytes{gpu="0",uuid="GPU-fake-0000",name="Fake GPU 0"} 1073741824' "$tmp/metrics"
"$http" "$port" /other >"$tmp/other"
check "prometheus: other paths are 404" grep -q "^HTTP/1.0 404" "$tmp/other"
kill -TERM $pid
wait $pid
check "TERM stops watch cleanly" [ $? = 0 ]

VRAMLEDGER_NVML_LIB=/nonexistent.so "$vl" watch --count 1 2>"$tmp/err"
check "no NVML: exit 1" [ $? = 1 ]
check "no NVML: said" grep -q "NVML" "$tmp/err"
"$vl" watch --csv a --jsonl b 2>/dev/null
check "csv and jsonl together: usage" [ $? = 2 ]

echo "$n checks, $fail failed"
[ $fail = 0 ]
