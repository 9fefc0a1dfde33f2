#!/bin/sh
# `vramledger watch` against a fake NVML: CSV, JSON Lines, textfile, the
# Prometheus endpoint (GET, HEAD, IPv6, dcgm-exporter's names and fields),
# the processes' labels, a one-sample spike between two scrapes in the
# _max_bytes gauges, a clean stop on TERM, and no NVML (slow, split and
# silent clients are tests/faults/run.sh's). Nothing waits on the clock:
# the fake NVML counts its readings, and the checks wait for them.
set -u
vl=$1 fake=$2 http=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_NVML_LIB="$fake" FAKE_NVML_GPUS=2 FAKE_NVML_PROCS="$tmp/procs"
echo "4242 1073741824 1" >"$tmp/procs"
# process 4242 as procfs shows it (--procfs): a command with characters a
# label must escape, in a container of a Kubernetes pod (cgroup v2, the
# kubelet's systemd driver, containerd)
cid=3f9b0e4d5c6a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e
uid=8d3e6a0c-1b2f-4c1e-9a3e-2f5d6c7b8a90
mkdir -p "$tmp/proc/4242"
printf '/opt/venv/bin/py"th\\on\0train.py\0' >"$tmp/proc/4242/cmdline"
echo "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(echo $uid | tr - _).slice/cri-containerd-$cid.scope" >"$tmp/proc/4242/cgroup"
export FAKE_NVML_READS="$tmp/reads" FAKE_NVML_SPIKE="$tmp/spike"
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
. "$(dirname "$0")/watch_port.sh" # watch_port ERRFILE

"$vl" watch --count 3 --interval-ms 10 --csv "$tmp/g.csv"
check "csv: exit 0 after --count" [ $? = 0 ]
check "csv: header + 3 samples x (2 GPUs + 1 process)" [ "$(wc -l <"$tmp/g.csv")" = 10 ]
check "csv: the process row" grep -q '^[0-9]*,1,"Fake GPU 1","GPU-fake-0001",141000000000,2147483648,51,4242,1073741824$' "$tmp/g.csv"
"$vl" watch --count 2 --interval-ms 10 --csv "$tmp/g.csv"
check "csv: appending adds no second header" [ "$(grep -c '^t_unix_ms' "$tmp/g.csv")" = 1 ]

"$vl" watch --count 2 --interval-ms 10 --jsonl "$tmp/g.jsonl"
check "jsonl: one line per sample" [ "$(wc -l <"$tmp/g.jsonl")" = 2 ]
check "jsonl: processes by GPU" grep -q '"index":1,"name":"Fake GPU 1".*"procs":\[{"pid":4242,"bytes":1073741824}\]' "$tmp/g.jsonl"

"$vl" watch --count 1 --textfile "$tmp" --procfs "$tmp/proc"
labels='gpu="1",uuid="GPU-fake-0001",pid="4242",command="py\"th\\on",container_id="containerd://'$cid'",pod_uid="'$uid'"'
check "textfile: written, the process with its command (escaped), container and pod" \
  grep -qF "vramledger_process_memory_used_bytes{$labels} 1073741824" "$tmp/vramledger.prom"
check "textfile: a process's most, with the same labels" \
  grep -qF "vramledger_process_memory_used_max_bytes{$labels} 1073741824" "$tmp/vramledger.prom"
check "textfile: up per GPU" grep -q '^vramledger_gpu_up{gpu="1",uuid="GPU-fake-0001",name="Fake GPU 1"} 1$' "$tmp/vramledger.prom"
check "textfile: no temporary left" sh -c "! ls '$tmp' | grep -q tmp"

# serve NAME ARGS...: start `watch ARGS` in the background, wait for the
# port it says on stderr and for its second reading of GPU 0 (the first is
# published then); $pid and $port for the checks that follow
serve() {
  : >"$tmp/err" # emptied here: the background shell may empty it after the loop below reads it
  rm -f "$tmp/reads" # this watch's readings, from 1
  "$vl" watch --interval-ms 50 --procfs "$tmp/proc" "$@" 2>"$tmp/err" &
  pid=$!
  port=$(watch_port "$tmp/err")
  i=0
  while [ "$(cat "$tmp/reads" 2>/dev/null || echo 0)" -lt 2 ] && [ $i -lt 1200 ]; do
    sleep 0.05
    i=$((i + 1))
  done
}

serve --prometheus-port 0
check "prometheus: said where, on 127.0.0.1" grep -q "http://127.0.0.1:[0-9]*/metrics" "$tmp/err"
"$http" "$port" /metrics >"$tmp/metrics"
check "prometheus: 200 with the exposition" grep -q "^HTTP/1.0 200" "$tmp/metrics"
check "prometheus: content type 0.0.4" grep -q "version=0.0.4" "$tmp/metrics"
check "prometheus: used bytes per GPU" grep -q 'vramledger_gpu_memory_used_bytes{gpu="0",uuid="GPU-fake-0000",name="Fake GPU 0"} 1073741824' "$tmp/metrics"
check "prometheus: up" grep -q '^vramledger_up 1' "$tmp/metrics"
check "prometheus: build info with this version" \
  grep -q "^vramledger_build_info{version=\"$("$vl" --version | sed 's/^vramledger //')\"} 1" "$tmp/metrics"
# the body is as long as Content-Length says
len=$(sed -n 's/^Content-Length: \([0-9]*\).*/\1/p' "$tmp/metrics")
check "prometheus: Content-Length is the body's" \
  [ "$(sed '1,/^\r*$/d' "$tmp/metrics" | wc -c)" = "$len" ]
"$http" -X HEAD "$port" /metrics >"$tmp/head"
check "HEAD: 200" grep -q "^HTTP/1.0 200" "$tmp/head"
check "HEAD: the length of what GET sends" grep -q "^Content-Length: [1-9]" "$tmp/head"
check "HEAD: no body" [ "$(sed '1,/^\r*$/d' "$tmp/head" | wc -c)" = 0 ]
"$http" "$port" /other >"$tmp/other"
check "prometheus: other paths are 404" grep -q "^HTTP/1.0 404" "$tmp/other"
"$http" -X POST "$port" /metrics >"$tmp/post"
check "prometheus: POST is 405 with Allow" sh -c "grep -q '^HTTP/1.0 405' '$tmp/post' && grep -q '^Allow: GET, HEAD' '$tmp/post'"
"$vl" watch --count 1 --prometheus-port "$port" --csv "$tmp/inuse.csv" 2>"$tmp/inuse"
check "port in use: exit 1" [ $? = 1 ]
check "port in use: no sample written" [ "$(wc -l <"$tmp/inuse.csv")" = 1 ]
check "port in use: the address said" grep -q "error: cannot listen on 127.0.0.1:$port: " "$tmp/inuse"
check "port in use: the fix said" grep -q "hint: another program listens on port $port: .*0 for a free one" "$tmp/inuse"
kill -TERM $pid
wait $pid
check "TERM stops watch cleanly" [ $? = 0 ]
# 192.0.2.1 is TEST-NET-1 (RFC 5737): no machine's own address
"$vl" watch --count 1 --listen 192.0.2.1:9400 2>"$tmp/notmine"
check "an address not this machine's: exit 1" [ $? = 1 ]
check "an address not this machine's: said, with the fix" \
  sh -c "grep -q 'cannot listen on 192.0.2.1:9400' '$tmp/notmine' && grep -q \"hint: '192.0.2.1' is none of this machine's addresses\" '$tmp/notmine'"

# The most since the previous scrape. reads: GPU 0's readings so far (the
# fake counts them); wait_reads N waits for N more (60 s at most). A
# reading is published before the next one is made, so two more readings
# mean an exposition made after the first of them is served.
reads() { cat "$tmp/reads" 2>/dev/null || echo 0; }
wait_reads() {
  want=$(($(reads) + $1)) i=0
  while [ "$(reads)" -lt "$want" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
}
gpu0='{gpu="0",uuid="GPU-fake-0000",name="Fake GPU 0"}'
serve --interval-ms 10 --prometheus-port 0
"$http" "$port" /metrics >/dev/null # a scrape: the maxima start again
wait_reads 2
echo "$((3 << 30)) 0" >"$tmp/spike" # one reading of GPU 0 says 3 GiB more
i=0
while [ -e "$tmp/spike" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
check "spike: the fake NVML gave it" [ ! -e "$tmp/spike" ]
# and process 4343, listed by NVML for a while, then gone
echo "4343 536870912 0" >>"$tmp/procs"
wait_reads 2
sed -i '/^4343 /d' "$tmp/procs"
wait_reads 2
"$http" "$port" /metrics >"$tmp/m1"
check "spike: the gauge is the last sample's" grep -qF "vramledger_gpu_memory_used_bytes$gpu0 1073741824" "$tmp/m1"
check "spike: the one sample between two scrapes is in _max_bytes" \
  grep -qF "vramledger_gpu_memory_used_max_bytes$gpu0 4294967296" "$tmp/m1"
check "a process gone since the previous scrape: no gauge" sh -c "! grep -q '^vramledger_process_memory_used_bytes{gpu=\"0\",[^}]*pid=\"4343\"' '$tmp/m1'"
check "a process gone since the previous scrape: its most" \
  grep -q '^vramledger_process_memory_used_max_bytes{gpu="0",uuid="GPU-fake-0000",pid="4343"[,}].* 536870912$' "$tmp/m1"
wait_reads 2
"$http" "$port" /metrics >"$tmp/m2"
check "the next scrape: the maxima started again" \
  grep -qF "vramledger_gpu_memory_used_max_bytes$gpu0 1073741824" "$tmp/m2"
check "the next scrape: the process gone is gone" sh -c "! grep -q 'pid=\"4343\"' '$tmp/m2'"
"$http" -X HEAD "$port" /metrics >/dev/null # HEAD takes no exposition: not a scrape
"$http" "$port" /metrics >"$tmp/m3"
echo "$((3 << 30)) 0" >"$tmp/spike"
i=0
while [ -e "$tmp/spike" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
wait_reads 2
"$http" -X HEAD "$port" /metrics >/dev/null
"$http" "$port" /metrics >"$tmp/m4"
check "HEAD between two scrapes resets nothing" \
  grep -qF "vramledger_gpu_memory_used_max_bytes$gpu0 4294967296" "$tmp/m4"
kill -TERM $pid
wait $pid

serve --metric-names dcgm --listen 127.0.0.1:0
check "--listen ADDR:PORT serves without --prometheus-port" [ -n "$port" ]
"$http" "$port" /metrics >"$tmp/dcgm"
# dcgm-exporter: MiB, and its labels in its order (render_metrics.go)
check "dcgm: FB_USED in MiB with dcgm-exporter's labels" \
  grep -q "^DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-fake-0001\",pci_bus_id=\"00000000:01:00.0\",device=\"nvidia1\",modelName=\"Fake GPU 1\",Hostname=\"$(hostname)\"} 2048\$" "$tmp/dcgm"
# the fields of dcgm-exporter's etc/default-counters.csv NVML gives, in its units
check "dcgm: SM and memory clocks in MHz" sh -c "grep -q '^DCGM_FI_DEV_SM_CLOCK{gpu=\"1\",.*} 1980\$' '$tmp/dcgm' && grep -q '^DCGM_FI_DEV_MEM_CLOCK{gpu=\"1\",.*} 2619\$' '$tmp/dcgm'"
check "dcgm: GPU temperature in C" grep -q '^DCGM_FI_DEV_GPU_TEMP{gpu="1",.*} 41$' "$tmp/dcgm"
check "dcgm: power in W from NVML's mW" grep -q '^DCGM_FI_DEV_POWER_USAGE{gpu="1",.*} 251.000$' "$tmp/dcgm"
check "dcgm: energy, a counter in mJ" sh -c "grep -q '^# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter' '$tmp/dcgm' && grep -q '^DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",.*} 1000000\$' '$tmp/dcgm'"
check "dcgm: its HELP line" grep -q '^# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).$' "$tmp/dcgm"
check "dcgm: FB_FREE and FB_TOTAL" sh -c "grep -q '^DCGM_FI_DEV_FB_FREE{' '$tmp/dcgm' && grep -q '^DCGM_FI_DEV_FB_TOTAL{' '$tmp/dcgm'"
check "dcgm: GPU_UTIL in whole %" grep -q '^DCGM_FI_DEV_GPU_UTIL{gpu="1",.*} 51$' "$tmp/dcgm"
check "dcgm: no vramledger GPU names where DCGM has one" \
  sh -c "! grep -Eq '^vramledger_gpu_(memory_(total|used)_bytes|utilization)' '$tmp/dcgm'"
check "dcgm: the most since the previous scrape and up under vramledger's names" \
  sh -c "grep -q '^vramledger_gpu_memory_used_max_bytes{gpu=\"1\",UUID=' '$tmp/dcgm' && grep -q '^vramledger_gpu_up{gpu=\"1\",UUID=.*} 1\$' '$tmp/dcgm'"
check "dcgm: up and process memory still" sh -c "grep -q '^vramledger_up 1' '$tmp/dcgm' && grep -q '^vramledger_process_memory_used_bytes{gpu=\"1\",UUID=\"GPU-fake-0001\",pid=\"4242\",command=' '$tmp/dcgm'"
kill -TERM $pid
wait $pid

# IPv6, where this machine has a loopback for it
if "$vl" watch --count 1 --listen '[::1]:0' >/dev/null 2>&1; then
  serve --listen '[::1]:0'
  check "IPv6: said in brackets" grep -q 'http://\[::1\]:[0-9]*/metrics' "$tmp/err"
  "$http" -a ::1 "$port" /metrics >"$tmp/v6"
  check "IPv6: served" grep -q "^vramledger_gpu_memory_used_bytes" "$tmp/v6"
  kill -TERM $pid
  wait $pid
else
  echo "skip IPv6: no ::1 here"
fi
"$vl" watch --count 1 --listen ::1 2>"$tmp/err"
check "--listen without a port: usage" [ $? = 2 ]
"$vl" watch --count 1 --listen '[::1' --prometheus-port 0 2>"$tmp/err"
check "--listen malformed: usage" [ $? = 2 ]
"$vl" watch --count 1 --listen 'localhost:9400' 2>"$tmp/err"
check "--listen takes addresses, not names: usage" [ $? = 2 ]
"$vl" watch --count 1 --listen '127.0.0.1:9400' --prometheus-port 9401 2>"$tmp/err"
check "--listen and --prometheus-port disagree: usage" [ $? = 2 ]
"$vl" watch --count 1 --metric-names dgcm 2>"$tmp/err"
check "--metric-names: a wrong name is usage" [ $? = 2 ]
check "--metric-names: the right one suggested" grep -q "did you mean 'dcgm'" "$tmp/err"

"$vl" watch --count 1 --textfile "$tmp" --metric-names dcgm
check "textfile: dcgm names too" grep -q '^DCGM_FI_DEV_FB_USED{gpu="0"' "$tmp/vramledger.prom"
FAKE_NVML_LOST=1 "$vl" watch --count 1 --textfile "$tmp"
check "a GPU NVML cannot read: up is 0" grep -q '^vramledger_up 0$' "$tmp/vramledger.prom"
check "a GPU NVML cannot read: the others still" grep -q '^vramledger_gpu_memory_used_bytes{gpu="0"' "$tmp/vramledger.prom"
check "a GPU NVML cannot read: its own up is 0, the others' 1" \
  sh -c "grep -q '^vramledger_gpu_up{gpu=\"1\",uuid=\"GPU-fake-0001\",name=\"Fake GPU 1\"} 0\$' '$tmp/vramledger.prom' && grep -q '^vramledger_gpu_up{gpu=\"0\",.*} 1\$' '$tmp/vramledger.prom'"
check "a GPU NVML cannot read: none of its gauges" sh -c "! grep -q '^vramledger_gpu_memory[a-z_]*{gpu=\"1\"' '$tmp/vramledger.prom'"

VRAMLEDGER_NVML_LIB=/nonexistent.so "$vl" watch --count 1 2>"$tmp/err"
check "no NVML: exit 1" [ $? = 1 ]
check "no NVML: said" grep -q "NVML" "$tmp/err"
"$vl" watch --csv a --jsonl b 2>/dev/null
check "csv and jsonl together: usage" [ $? = 2 ]

echo "$n checks, $fail failed"
[ $fail = 0 ]
