#!/bin/sh
# `vramledger run` and `report` end to end, with a fake NVML and the
# interposer on stub CUDA libraries: exit status, a missing command, the
# layers of a record, sweep, trace, estimate --dry-run (faults, signals
# and kills are tests/faults/run.sh's).
set -u
vl=$1 prog=$2 fake=$3 preload=$4 stub=$5 record_check=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$preload" LD_LIBRARY_PATH="$stub"
dir=$(cd "$(dirname "$0")" && pwd)
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
json() { # json DIR KEY VALUE: the report's JSON has "KEY": VALUE
  "$vl" report "$1" --format json | grep -q "\"$2\": $3"
}

"$vl" run --out "$tmp/exit7" --quiet -- sh -c 'exit 7'
check "exit status passes through" [ $? = 7 ]
check "record has the exit status" json "$tmp/exit7" exit_status 7
check "run directory is 0700" [ "$(stat -c %a "$tmp/exit7")" = 700 ]
check "record is 0600" [ "$(stat -c %a "$tmp/exit7/record.jsonl")" = 600 ]

# --out a directory that exists: its mode is the user's, never changed;
# one every user may write in without the sticky bit is refused; a
# symbolic link is refused whatever slashes end it
mkdir "$tmp/mine" "$tmp/shared" "$tmp/open" && chmod 755 "$tmp/mine" && chmod 1777 "$tmp/shared" &&
  chmod 777 "$tmp/open"
"$vl" run --out "$tmp/mine" --quiet -- true
check "--out an existing directory: used, its mode left (755)" \
  [ "$?.$(stat -c %a "$tmp/mine")" = 0.755 ]
"$vl" run --out "$tmp/mine" --quiet -- true 2>/dev/null
check "and when refused (a record there), still 755" [ "$?.$(stat -c %a "$tmp/mine")" = 1.755 ]
"$vl" run --out "$tmp/shared" --quiet -- true
check "--out a sticky world-writable directory (as /tmp): used, 1777 kept" \
  [ "$?.$(stat -c %a "$tmp/shared").$(stat -c %a "$tmp/shared/record.jsonl")" = 0.1777.600 ]
"$vl" run --out "$tmp/open" --quiet -- true 2>"$tmp/err"
check "--out a world-writable directory without the sticky bit: refused, mode kept" \
  [ "$?.$(stat -c %a "$tmp/open").$(ls -A "$tmp/open")" = 1.777. ]
check "said, naming it and the fix" sh -c "grep -q \"cannot use '$tmp/open' as the run directory: \
every user may write in it\" '$tmp/err' && grep -q 'hint: give --out a directory of yours.*chmod +t' '$tmp/err'"
mkdir "$tmp/target" && chmod 755 "$tmp/target" && ln -s "$tmp/target" "$tmp/link"
for out in "$tmp/link" "$tmp/link/" "$tmp/link//" "$tmp/link/." "$tmp/link/./"; do
  "$vl" run --out "$out" --quiet -- true 2>"$tmp/err"
  check "--out '${out#"$tmp"/}' (a symbolic link): refused, its target untouched" \
    sh -c "[ $? = 1 ] && grep -q 'is a symbolic link' '$tmp/err' && [ -z \"\$(ls -A '$tmp/target')\" ] &&
      [ \$(stat -c %a '$tmp/target') = 755 ]"
done

# secrets on the command line are not kept: the documented rule and $VRAMLEDGER_REDACT
VRAMLEDGER_REDACT='--hf-*' "$vl" run --out "$tmp/secret" --quiet -- sh -c 'exit 0' x \
  --password=hunter2 --api-token abc123 --hf-repo private-repo --lr 0.1
check "a secret's value is not in the record" sh -c "! grep -q 'hunter2\|abc123\|private-repo' '$tmp/secret/record.jsonl'"
check "it is said as redacted" grep -q '"--password=<redacted>","--api-token","<redacted>","--hf-repo","<redacted>","--lr","0.1"' "$tmp/secret/record.jsonl"
check "nor in the report" sh -c "'$vl' report '$tmp/secret' | head -1 | grep -q 'password=<redacted>'"
# read whole: a pattern past 511 bytes of VRAMLEDGER_REDACT, a secret's word
# past a flag's 127th byte
long=$(printf -- '--%0150d-password' 0)
VRAMLEDGER_REDACT="$(printf -- '--x%03d,' $(seq 120)),--hf-*" "$vl" run --out "$tmp/secret2" --quiet \
  -- sh -c 'exit 0' x "$long=hunter2" --hf-repo private-repo
check "secrets past a fixed buffer are redacted too" sh -c "! grep -q 'hunter2\|private-repo' '$tmp/secret2/record.jsonl' && grep -q '\"--hf-repo\",\"<redacted>\"' '$tmp/secret2/record.jsonl'"
# secrets outside flag names: NAME=VALUE words whose name is a secret's, the
# password of -u/--user USER:PASSWORD, a secret header, a URL's userinfo
# and secret query values; python's -u and a plain URL are kept
"$vl" run --out "$tmp/secret3" --quiet -- env HF_TOKEN=hf_s1 api_key=s2 LR=0.1 true curl \
  -u bob:s3 --user=al:s4 -H 'Authorization: Bearer s5' 'https://u:s6@h.io/p?x=1&token=s7&access_token=s8' \
  https://s9@github.com/r.git python -u train.py https://h.io/plain?page=2 '--header=Cookie: id=s1' \
  -H 'Accept: text/plain'
check "secrets outside flag names are not in the record" \
  sh -c "! grep -q 's[1-9]' '$tmp/secret3/record.jsonl'"
check "each said as redacted, what is no secret kept" grep -q \
  '"HF_TOKEN=<redacted>","api_key=<redacted>","LR=0.1","true","curl","-u","bob:<redacted>","--user=al:<redacted>","-H","Authorization: <redacted>","https://u:<redacted>@h.io/p?x=1&token=<redacted>&access_token=<redacted>","https://<redacted>@github.com/r.git","python","-u","train.py","https://h.io/plain?page=2","--header=Cookie: <redacted>","-H","Accept: text/plain"' \
  "$tmp/secret3/record.jsonl"

# a job that ends between two ticks is noticed when it ends, not at the
# next tick a minute later (the sampler waits on the job's pidfd)
start=$(date +%s)
timeout 30 "$vl" run --out "$tmp/quick" --interval-ms 60000 --quiet -- sh -c 'sleep 0.2; exit 4'
rc=$? took=$(($(date +%s) - start))
check "a job's end ends a long tick" [ "$rc.$((took < 20))" = 4.1 ]

"$vl" run --out "$tmp/missing" --quiet -- /nonexistent/command 2>"$tmp/err"
check "missing command gives 127" [ $? = 127 ]
check "missing command is named" grep -q "cannot run '/nonexistent/command'" "$tmp/err"
check "its record as the schema says (lib/measure/record_schema.def)" \
  "$record_check" "$tmp/missing/record.jsonl"


# the layers: fake NVML sees the program's process with 64 MiB + 500 MiB,
# the interposer sees its 64 MiB cudaMalloc
: >"$tmp/procs"
export FAKE_NVML_PROCS="$tmp/procs"
"$vl" run --out "$tmp/hold" --interval-ms 10 --quiet -- "$prog" hold 64 0.6 "$tmp/procs"
check "the held program succeeds" [ $? = 0 ]
check "peak process bytes (NVML)" json "$tmp/hold" process_bytes 591396864
check "peak driver-allocated bytes (interposer)" json "$tmp/hold" cuda_alloc_bytes 67108864
check "context bytes = process - allocated" json "$tmp/hold" context_bytes 524288000
check "the fake GPU is named" sh -c "'$vl' report '$tmp/hold' --format json | grep -q 'Fake GPU 0'"
check "the mark is recorded, in the process's own stream" \
  sh -c "grep -q '\"name\":\"holding\"' '$tmp/hold/record.d/'interposer.*.jsonl &&
    ! grep -q '\"type\":\"mark\"' '$tmp/hold/record.jsonl'"
check "the CUDA driver version is recorded" grep -q '"cuda_driver":"13.0"' "$tmp/hold/record.jsonl"
check "samples every 10 ms" sh -c "[ \$(grep -c '\"type\":\"sample\"' '$tmp/hold/record.jsonl') -ge 20 ]"
check "every line as the schema says (lib/measure/record_schema.def)" \
  "$record_check" "$tmp/hold/record.jsonl" "$tmp/hold/record.d/"*.jsonl "$tmp/exit7/record.jsonl"
# two processes stamping marks as fast as they can, at once: each writes its
# own stream (no line of one can cut or split the other's), and the record
# reads back every mark, in time order (docs/record.md, "Streams")
"$vl" run --out "$tmp/marks" --quiet -- "$prog" marks 20000
check "two writers at once: the job succeeds" [ $? = 0 ]
check "two writers at once: a stream each, every line whole and as the schema says" \
  sh -c "[ \$(ls '$tmp/marks/record.d' | wc -l) = 2 ] &&
    '$record_check' '$tmp/marks/record.d/'*.jsonl"
check "two writers at once: every mark read back, in time order" \
  "$record_check" --marks 40001 "$tmp/marks/record.jsonl"
"$vl" report "$tmp/hold" --format trace >"$tmp/trace.json"
check "trace is Chrome trace JSON" grep -q '"traceEvents"' "$tmp/trace.json"

: >"$tmp/procs"
FAKE_NVML_OLD=1 "$vl" run --out "$tmp/old" --interval-ms 10 --quiet -- "$prog" hold 64 0.3 "$tmp/procs"
check "NVML v1 fallbacks give the same peak" json "$tmp/old" process_bytes 591396864

: >"$tmp/procs"
FAKE_NVML_GPUS=2 CUDA_VISIBLE_DEVICES=1 "$vl" run --out "$tmp/vis" --quiet -- true
check "CUDA_VISIBLE_DEVICES selects the GPUs" sh -c "'$vl' report '$tmp/vis' --format json | grep -q 'Fake GPU 1' && ! '$vl' report '$tmp/vis' --format json | grep -q 'Fake GPU 0'"
FAKE_NVML_GPUS=2 CUDA_VISIBLE_DEVICES=0,0 "$vl" run --out "$tmp/vis00" --quiet -- true
check "a GPU named twice in CUDA_VISIBLE_DEVICES is one GPU" sh -c "[ \$(grep -o '\"index\":' '$tmp/vis00/record.jsonl' | head -50 | wc -l) -ge 1 ] && [ \$(head -1 '$tmp/vis00/record.jsonl' | grep -o '\"uuid\"' | wc -l) = 1 ]"
FAKE_NVML_GPUS=2 CUDA_VISIBLE_DEVICES="$(printf '0,%.0s' $(seq 600))1" "$vl" run --out "$tmp/vislong" --quiet -- true
check "CUDA_VISIBLE_DEVICES is read whole, past 1023 bytes" sh -c "[ \$(head -1 '$tmp/vislong/record.jsonl' | grep -o '\"uuid\"' | wc -l) = 2 ]"
FAKE_NVML_GPUS=2 CUDA_VISIBLE_DEVICES=1,x,0 "$vl" run --out "$tmp/visx" --quiet -- true
check "the first entry naming no GPU ends CUDA_VISIBLE_DEVICES" sh -c "[ \$(head -1 '$tmp/visx/record.jsonl' | grep -o '\"uuid\"' | wc -l) = 1 ]"

VRAMLEDGER_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$vl" run --out "$tmp/nonvml" -- sh -c 'exit 3' 2>"$tmp/err"
check "without NVML the command still runs" [ $? = 3 ]
check "without NVML a note says so" grep -q "without GPU samples" "$tmp/err"
check "without NVML the report says so" sh -c "'$vl' report '$tmp/nonvml' --format json | grep -q no-nvml"

"$vl" run --out "$tmp/orphan" --interval-ms 10 --quiet -- "$prog" orphan
check "a child's allocations count while it lives" json "$tmp/orphan" cuda_alloc_bytes 33554432
check "and not after it exits" sh -c "grep '\"type\":\"sample\"' '$tmp/orphan/record.jsonl' | tail -1 | grep -q '\"cuda_alloc_bytes\":0'"

# a launcher that exits (status 3) leaving its child holding 32 MiB for
# 0.6 s: run is the job's child subreaper, records the child until it
# ends, and exits with the launcher's status
: >"$tmp/procs"
"$vl" run --out "$tmp/left" --interval-ms 10 --quiet -- "$prog" leave 3 32 0.6 "$tmp/procs" 2>"$tmp/err"
check "left: the status is the job's, not its child's" [ $? = 3 ]
check "left: the wait is said" grep -q "waiting for 1 process the job left (PID [0-9]*; the job exited with status 3)" "$tmp/err"
check "left: the record names it" grep -q '"type":"descendants","t_ns":[0-9]*,"procs":1,"pids":\[[0-9]*\],"waited":true}' "$tmp/left/record.jsonl"
check "left: after the job's exit, its samples: its allocation, its NVML memory, until it ends" python3 -c "
import glob, json, sys
ev = [json.loads(l) for f in glob.glob('$tmp/left/record.jsonl') + glob.glob('$tmp/left/record.d/*.jsonl') for l in open(f) if l.strip()]
ev.sort(key=lambda e: e['t_ns'])
d = next(e for e in ev if e['type'] == 'descendants')
after = [e for e in ev if e['type'] == 'sample' and e['t_ns'] > d['t_ns']]
pid = d['pids'][0]
held = [e for e in after if e['cuda_alloc_bytes'] == 32 << 20 and
        {'pid': pid, 'gpu': 0, 'bytes': (32 << 20) + (500 << 20)} in e.get('procs', [])]
last_mark = max(e['t_ns'] for e in ev if e['type'] == 'mark' and e['pid'] == pid)
ex = ev[-1] if ev[-1]['type'] == 'exit' else {}
sys.exit(not (len(held) >= 20 and after[-1]['t_ns'] >= last_mark and ex.get('status') == 3
              and ex.get('descendants_left') == 0))"

# --no-wait-descendants: run stops at the job's exit, saying what it leaves
: >"$tmp/procs"
# (what it left holds on for 30 s: still running when run returns, not timed)
"$vl" run --out "$tmp/nowait" --interval-ms 10 --no-wait-descendants -- "$prog" leave 4 8 30 "$tmp/procs" 2>"$tmp/err"
rc=$?
left=$(sed -n 's/.*"type":"descendants".*"pids":\[\([0-9]*\)\].*/\1/p' "$tmp/nowait/record.jsonl")
alive=0
[ -n "$left" ] && kill -0 "$left" 2>/dev/null && alive=1
check "--no-wait-descendants: stops at the job's exit (what it left still runs), with its status" [ "$rc.$alive" = 4.1 ]
check "--no-wait-descendants: the record says what it left" sh -c "grep -q '\"pids\":\[$left\],\"waited\":false}' '$tmp/nowait/record.jsonl' && grep -q '\"type\":\"exit\",.*\"descendants_left\":1,' '$tmp/nowait/record.jsonl'"
check "--no-wait-descendants: and stderr" grep -q "left 1 process running (PID $left), not recorded further" "$tmp/err"
check "--no-wait-descendants: no wait said" sh -c "! grep -q 'waiting for' '$tmp/err'"
check "left: report says it outlived the job's own and was waited for" sh -c "'$vl' report '$tmp/left' | grep -q '^  1 process outlived the job.s own at [0-9.]* s (PID [0-9]*); run waited for it until [0-9.]* s\$'"
check "left: doctor finds nothing left running" sh -c "'$vl' doctor '$tmp/left' --fail-on descendants-left >/dev/null"
check "--no-wait-descendants: report says what was left" sh -c "'$vl' report '$tmp/nowait' | grep -q '^  1 was still running when the record closed' && '$vl' report '$tmp/nowait' --format json | grep -q '\"left\": 1'"
check "--no-wait-descendants: doctor's VL-D016 names its PID" sh -c "'$vl' doctor '$tmp/nowait' | grep -q 'VL-D016 warn \[descendants-left\]' && '$vl' doctor '$tmp/nowait' | grep -q '(PID $left) still ran'"
check "--no-wait-descendants: doctor --fail-on descendants-left exits 3" sh -c "'$vl' doctor '$tmp/nowait' --fail-on descendants-left >/dev/null; [ \$? = 3 ]"
[ -n "$left" ] && kill "$left" 2>/dev/null
# what the job left starts more and exits: those are found and waited for
# too (two descendants events); what ends within 100 ms of the job is
# reaped without a word (workers ended by the job's own end)
start=$(date +%s%N)
"$vl" run --out "$tmp/left2" --quiet -- sh -c "sh -c 'sleep 0.3; sleep 0.4 & exit 0' & exit 0" 2>"$tmp/err"
rc=$? took=$((($(date +%s%N) - start) / 1000000))
check "left: what they start is waited for (${took} ms)" [ "$rc.$((took >= 700))" = 0.1 ]
check "left: and recorded" [ "$(grep -c '"type":"descendants"' "$tmp/left2/record.jsonl")" = 2 ]
"$vl" run --out "$tmp/left3" --quiet -- sh -c "sleep 0.02 & exit 0" 2>"$tmp/err"
check "left: ended within 100 ms of the job: no word" sh -c "! grep -q 'waiting for' '$tmp/err' && ! grep -q '\"descendants' '$tmp/left3/record.jsonl'"
# --interval-ms 1: the sampler wakes every 20 ms and writes each
# millisecond's sample from the interposer's rings (docs/record.md); a
# block held 3 ms shows in its samples, one held microseconds in
# cuda_alloc_max_bytes
"$vl" run --out "$tmp/ms1" --interval-ms 1 --quiet -- "$prog" blip
check "1 ms: the job succeeds" [ $? = 0 ]
cat >"$tmp/ms1.py" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]  # a line in flight may be closed
s = [e for e in ev if e["type"] == "sample"]
ex = [e for e in ev if e["type"] == "exit"][0]
MiB = 1 << 20
what = sys.argv[2]
if what == "block":  # 64 + 32 MiB for 3 ms: 2 or 3 samples, more if the sleep overran
    # (a loaded machine): never every one
    ok = 2 <= sum(e["cuda_alloc_bytes"] == 96 * MiB for e in s) < len(s) // 2
elif what == "blip":  # 64 + 16 MiB for microseconds: the most between two samples
    ok = any(e.get("cuda_alloc_max_bytes") == 80 * MiB for e in s)
elif what == "peak":  # report's driver-allocated peak: the most between two samples
    most = max(max(e["cuda_alloc_bytes"], e.get("cuda_alloc_max_bytes", 0)) for e in s)
    rep = json.load(open(sys.argv[3]))["peak"]["cuda_alloc_bytes"]
    ok = rep == most and (len(sys.argv) < 5 or rep == int(sys.argv[4]) * MiB)
elif what == "count":  # a sample a millisecond from the first to the last, and those
    # span the loop but its end (the job's exit handled after the last sample: up to a
    # wake-up's 20 ms on a loaded machine); one a wake-up would be 20 times fewer
    ms = ex["sampling_wall_ns"] / 1e6
    span = (s[-1]["t_ns"] - s[0]["t_ns"]) / 1e6
    ok = abs(len(s) - 1 - span) <= 2 and span >= ms - 20 and ex["samples"] == len(s)
elif what == "wakes":  # a wake-up every 20 ms, not every sample
    ok = 0 < ex.get("sampling_wakes", 0) * 5 <= len(s)
elif what == "grid":  # each millisecond's end, in order, and two samples of the wakes'
    # (the first, after the milliseconds the loop's start took on a loaded machine; the last)
    t = [e["t_ns"] for e in s if e["t_ns"] % 1000000 == 0]
    ok = len(s) - len(t) <= 2 and all(b - a == 1000000 for a, b in zip(t, t[1:]))
sys.exit(0 if ok else 1)
PY
for w in block blip count wakes grid; do
  check "1 ms: $w" python3 "$tmp/ms1.py" "$tmp/ms1/record.jsonl" $w
done
check "1 ms: the record reads whole, no gap in it" sh -c "'$vl' report '$tmp/ms1' --format json >'$tmp/ms1.json' && ! grep -q '\"gap\"' '$tmp/ms1.json'"
"$vl" report "$tmp/ms1" --format json >"$tmp/ms1.json"
check "1 ms: report's driver-allocated peak is the samples' most (the 3 ms block)" \
  python3 "$tmp/ms1.py" "$tmp/ms1/record.jsonl" peak "$tmp/ms1.json" 96
# the 16 MiB blip in a second process: 80 MiB only between two samples
# (each process's alloc lines carry its own peak, 64 and 16 MiB), and
# that is report's driver-allocated peak
"$vl" run --out "$tmp/flash" --interval-ms 1 --quiet -- "$prog" flash
check "1 ms: a second process's blip: the job succeeds" [ $? = 0 ]
"$vl" report "$tmp/flash" --format json >"$tmp/flash.json"
check "1 ms: a second process's blip is report's driver-allocated peak" \
  python3 "$tmp/ms1.py" "$tmp/flash/record.jsonl" peak "$tmp/flash.json" 80
# a sampler stopped for longer than the rings hold (512 ms) while the
# job allocates every 0.1 ms: the samples go on from the bytes at its
# wake-ups, and a note says so once
# (stopped once its first sample is written, 60 s at most: the job runs)
"$vl" run --out "$tmp/late" --interval-ms 1 --quiet -- "$prog" churn 2.5 &
vlpid=$!
i=0
until grep -q '"type":"sample"' "$tmp/late/record.jsonl" 2>/dev/null || [ $i -ge 1200 ]; do
  sleep 0.05
  i=$((i + 1))
done
kill -STOP $vlpid
sleep 1.5
kill -CONT $vlpid
wait $vlpid
check "1 ms, late: the job succeeds" [ $? = 0 ]
check "1 ms, late: one note" [ "$(grep -c '"type":"note".*overwritten before they were read' "$tmp/late/record.jsonl")" = 1 ]
check "1 ms, late: a sample a millisecond still" python3 "$tmp/ms1.py" "$tmp/late/record.jsonl" count
# a process counting as an older interposer does (its slot's rings flag
# left 0; include/vramledger/counters.h: the slots after a 40-byte head,
# pid, rings, live, peak, allocs, frees): its bytes at the wake-ups, said
"$vl" run --out "$tmp/oldpre" --interval-ms 1 --quiet -- python3 -c "
import mmap, os, struct, time
f = open(os.environ['VRAMLEDGER_COUNTERS'], 'r+b')
m = mmap.mmap(f.fileno(), 0)
m[48:80] = struct.pack('<QQQQ', 1 << 20, 1 << 20, 1, 0)
m[40:48] = struct.pack('<II', os.getpid(), 0)
time.sleep(0.2)"
check "1 ms, older interposer: the job succeeds" [ $? = 0 ]
check "1 ms, older interposer: one note" [ "$(grep -c '"type":"note".*are not kept (an older' "$tmp/oldpre/record.jsonl")" = 1 ]
check "1 ms, older interposer: its bytes in the samples" sh -c "[ \$(grep -c '\"type\":\"sample\".*\"cuda_alloc_bytes\":1048576' '$tmp/oldpre/record.jsonl') -ge 100 ]"

# sweep: a grid of runs, a point out of memory, resume, and fit on the table
: >"$tmp/procs"
"$vl" sweep --grid mib=16,32,64,128 --grid secs=0.15 --interval-ms 10 --out "$tmp/sweep" -- "$prog" hold {mib} {secs} "$tmp/procs" >/dev/null 2>&1
check "sweep: one row per point" [ "$(grep -c ',ok$' "$tmp/sweep/sweep.csv")" = 4 ]
check "sweep: the driver-allocated peak of each point" grep -q '^2,64,0.15,[0-9]*,67108864,' "$tmp/sweep/sweep.csv"
check "sweep: steps per second from the job's vl_mark(\"step\"), no tokens without batch and seq" grep -q '^2,64,0.15,[0-9]*,67108864,,,,,[0-9.]*,[0-9.]*,[1-9][0-9.]*,,ok$' "$tmp/sweep/sweep.csv"
"$vl" sweep --grid batch=4 --grid seq=8 --interval-ms 10 --out "$tmp/sweeptok" -- "$prog" hold {batch} 0.{seq} "$tmp/procs" >/dev/null 2>&1
check "sweep: tokens per second = steps per second x batch x seq" awk -F, 'NR == 2 { exit !($12 > 0 && ($13 - $12 * 32) ^ 2 < 1e-6 * $13 ^ 2) }' "$tmp/sweeptok/sweep.csv"
"$vl" fit "$tmp/sweep" --terms const,mib --predict mib=256,secs=0.15 --format json >"$tmp/fit.json"
check "sweep feeds fit" grep -q '"r2": 1' "$tmp/fit.json"
"$vl" sweep --grid mib=16,32,64,128 --grid secs=0.15 --out "$tmp/sweep" -- "$prog" hold {mib} {secs} "$tmp/procs" 2>"$tmp/err" >/dev/null
check "sweep resumes: nothing run again" sh -c "! grep -q 'sweep point' '$tmp/err'"
pydir=$(cd "$(dirname "$0")/../../python" && pwd)
"$vl" run --out "$tmp/pymark" --quiet -- python3 -c "import sys; sys.path.insert(0, '$pydir'); import vramledger
for i in range(4): vramledger.mark('step')"
check "python: vramledger.mark() stamps the record" [ "$(cat "$tmp/pymark/record.jsonl" "$tmp/pymark/record.d/"*.jsonl | grep -c '"name":"step"')" = 4 ]
python3 -c "import sys; sys.path.insert(0, '$pydir'); import vramledger; vramledger.mark('step')"
check "python: vramledger.mark() outside run does nothing" [ $? = 0 ]
# the runtime guard: 64 MiB + 500 MiB of context pass 105 % of a 256 MiB commitment
: >"$tmp/procs"
"$vl" run --out "$tmp/guard" --interval-ms 10 --quiet --commitment "$dir/../data/commitments/guard-256mib.json" -- "$prog" hold 64 0.3 "$tmp/procs" 2>"$tmp/err"
check "guard: the job is not stopped" [ $? = 0 ]
check "guard: the trigger is recorded once" [ "$(grep -c '"type":"trigger"' "$tmp/guard/record.jsonl")" = 1 ]
check "guard: the fallback file is left for the job" grep -q peak_over_commitment "$tmp/guard/fallback"
check "guard: stderr says so" grep -q "trigger: the job holds" "$tmp/err"
: >"$tmp/procs"
# the job holds until the trigger's fallback file is there (60 s at most),
# then asks, then ends what holds
"$vl" run --out "$tmp/guardpy" --interval-ms 10 --quiet --commitment "$dir/../data/commitments/guard-256mib.json" -- sh -c "'$prog' hold 64 60 '$tmp/procs' & h=\$!; i=0; until [ -e '$tmp/guardpy/fallback' ] || [ \$i -ge 1200 ]; do sleep 0.05; i=\$((i + 1)); done; python3 -c \"import sys; sys.path.insert(0, '$pydir'); import vramledger; sys.exit(0 if vramledger.fallback_requested() else 5)\"; st=\$?; kill \$h; wait; exit \$st"
check "guard: vramledger.fallback_requested() sees it" [ $? = 0 ]
: >"$tmp/procs"
# (what holds is ended when the signal comes, 60 s at most)
"$vl" run --out "$tmp/guardsig" --interval-ms 10 --quiet --commitment "$dir/../data/commitments/guard-256mib.json" --trigger-signal USR1 -- sh -c "trap 'echo got > $tmp/sig; kill \$h' USR1; '$prog' hold 64 60 '$tmp/procs' & h=\$!; wait; wait" 2>/dev/null
check "guard: --trigger-signal USR1 reaches the job" grep -q got "$tmp/sig"
"$vl" run --quiet --trigger-signal USR1 -- true 2>/dev/null
check "guard: --trigger-signal without a commitment is refused" [ $? = 2 ]
"$vl" run --out "$tmp/guardbad" --quiet --commitment "$dir/../data/commitments/truncated.json" -- true 2>/dev/null
check "guard: a bad commitment is refused before the job runs" [ $? = 1 ] && [ ! -e "$tmp/guardbad" ]
"$vl" sweep --grid b=1,2 --out "$tmp/oom" -- sh -c 'if [ {b} = 2 ]; then echo "CUDA out of memory" >&2; exit 1; fi' >/dev/null 2>&1
check "sweep: an out-of-memory point is recorded and the sweep goes on" grep -q '^1,2,0,0,,,,,0.00,[0-9.]*,,,oom$' "$tmp/oom/sweep.csv"
"$vl" sweep --grid b=1 --grid c=2 --out "$tmp/bad" -- echo {b} 2>/dev/null
check "sweep: an unused variable is refused" [ $? = 2 ]
"$vl" sweep --grid b=1 --out "$tmp/bad" -- echo {x} 2>/dev/null
check "sweep: an undefined placeholder is refused" [ $? = 2 ]

"$vl" run --out "$tmp/batch" --interval-ms 10 --quiet -- "$prog" hold 8 0.5
check "samples at 10 ms, written in batches: all there, in time order, the exit last" \
  sh -c "r='$tmp/batch/record.jsonl'
    [ \$(grep -c '\"type\":\"sample\"' \$r) -ge 30 ] &&
    tail -1 \$r | grep -q '\"type\":\"exit\"' &&
    grep '\"type\":\"sample\"' \$r | sed 's/.*\"t_ns\":\([0-9]*\).*/\1/' | sort -c -n"

"$vl" run --quiet 2>"$tmp/err"
check "run needs a command" [ $? = 2 ]

# `trace` of a job (the job writes its trace itself here: no torch needed):
# a failed job's replay is marked incomplete, never bare numbers, and
# trace exits with the job's status; a job that leaves no trace, nothing
"$vl" trace --out "$tmp/tr3" --format json -- sh -c \
  'printf "m forward 1\na 1 4096 cuda\nm backward 1\n" >"$VRAMLEDGER_TRACE"; exit 3' \
  >"$tmp/out" 2>"$tmp/err"
check "trace: a failed job's status passes through" [ $? = 3 ]
check "trace: its replay is not complete" grep -q '"complete": false' "$tmp/out"
check "trace: and says where it stopped" grep -q '"stopped_after_mark": "backward 1"' "$tmp/out"
"$vl" trace --out "$tmp/tr9" -- sh -c \
  'printf "m forward 1\na 1 4096 cuda\na 2 40" >"$VRAMLEDGER_TRACE"; kill -9 $$' >"$tmp/out" 2>"$tmp/err"
check "trace: a killed job gives 128 + signal" [ $? = 137 ]
check "trace: the kill is said" grep -q "killed by signal 9 (status 137)" "$tmp/out"
check "trace: the cut last line is said" grep -q "last line was cut (6 bytes), ignored" "$tmp/out"
check "trace: the peaks are of the part that ran" grep -q "the peak of the part that ran: event 2 of 2, in 'forward 1'" "$tmp/out"
"$vl" trace --out "$tmp/tr0" --format json -- sh -c 'printf "a 1 4096 cuda\nf 1\n" >"$VRAMLEDGER_TRACE"' \
  >"$tmp/out" 2>"$tmp/err"
check "trace: a job that succeeded is complete" sh -c "[ $? = 0 ] && grep -q '\"complete\": true' '$tmp/out'"
# the tracer sizes CUDA reductions' scratch for the card: --gpu's SMs and
# threads per SM from the catalog, else the model's SM count (the
# reference card's, from the catalog too) unless the environment has one
card() { # card NAME: "SMS THREADS CAPABILITY WORKSPACE" of the catalog's entry
  python3 -c 'import json, sys
g = [g for g in json.load(open(sys.argv[1]))["gpus"] if g["name"] == sys.argv[2]][0]
ws = g["cublas_workspace_bytes"] + g.get("cublaslt_workspace_bytes", 0)
print(g.get("sm_count", "-"), g.get("max_threads_per_sm", "-"), g["compute_capability"], ws)' \
    "$dir/../../data/gpus.json" "$1"
}
tell='printf "%s %s %s %s\n" "$VRAMLEDGER_TRACE_SMS" "${VRAMLEDGER_TRACE_THREADS_PER_SM-unset}" \
  "${VRAMLEDGER_TRACE_CAPABILITY-unset}" "${VRAMLEDGER_TRACE_WORKSPACE_BYTES-unset}" >"$0";
  printf "a 1 4096 cuda\nf 1\n" >"$VRAMLEDGER_TRACE"'
VRAMLEDGER_TRACE_SMS=7 VRAMLEDGER_TRACE_CAPABILITY=9.0 VRAMLEDGER_TRACE_WORKSPACE_BYTES=1 \
  "$vl" trace --gpu a100-80gb --out "$tmp/trsm" -- sh -c "$tell" "$tmp/sms" >/dev/null 2>&1
check "trace: --gpu gives the tracer the card's SMs, threads per SM, capability, workspaces" \
  [ "$(cat "$tmp/sms")" = "$(card a100-80gb)" ]
check "trace: the A100's are its datasheet's and PyTorch's :4096:2:16:8" \
  [ "$(cat "$tmp/sms")" = "108 2048 8.0 8519680" ]
"$vl" trace --gpu mi300x --out "$tmp/trmi" -- sh -c "$tell" "$tmp/sms" >/dev/null 2>&1
check "trace: the MI300X's hipBLAS + hipBLASLt workspaces, the H200's SMs" \
  [ "$(cat "$tmp/sms")" = "$(card h200 | cut -d' ' -f1) unset gfx942 $((204 << 20))" ]
"$vl" trace --out "$tmp/trsm0" -- sh -c "$tell" "$tmp/sms" >/dev/null 2>&1
check "trace: without --gpu, the reference card's SMs" \
  [ "$(cat "$tmp/sms")" = "$(card h200 | cut -d' ' -f1) unset unset unset" ]
VRAMLEDGER_TRACE_SMS=7 VRAMLEDGER_TRACE_CAPABILITY=8.0 "$vl" trace --out "$tmp/trsm7" -- \
  sh -c "$tell" "$tmp/sms" >/dev/null 2>&1
check "trace: without --gpu, the environment's stay" [ "$(cat "$tmp/sms")" = "7 unset 8.0 unset" ]
"$vl" trace --out "$tmp/tr0" -- true >"$tmp/out" 2>"$tmp/err"
check "trace: an old trace is never replayed as a new job's" sh -c "[ $? = 1 ] && [ ! -s '$tmp/out' ]"
check "trace: and the old trace is named" grep -q "'$tmp/tr0/alloc.trace' exists" "$tmp/err"
"$vl" trace --out "$tmp/trmissing" -- /nonexistent/command >"$tmp/out" 2>"$tmp/err"
check "trace: a missing command gives 127" [ $? = 127 ]
check "trace: the missing command is named" grep -q "no trace: '/nonexistent/command'" "$tmp/err"
check "trace: and no replay printed" [ ! -s "$tmp/out" ]
"$vl" trace --out "$tmp/trnone" -- true >"$tmp/out" 2>"$tmp/err"
check "trace: a job that wrote no trace fails" sh -c "[ $? = 1 ] && [ ! -s '$tmp/out' ]"
"$vl" trace --out "$tmp/trempty" -- sh -c ': >"$VRAMLEDGER_TRACE"; kill -9 $$' >"$tmp/out" 2>"$tmp/err"
check "trace: an empty trace of a killed job: its status, no replay" sh -c "[ $? = 137 ] && [ ! -s '$tmp/out' ]"
check "trace: the empty trace is said" grep -q "no allocation events: 'sh' was killed by signal 9" "$tmp/err"

# estimate --dry-run through a Python that is a shell script (no torch
# needed): the module check (-c) prints what it lacks ($FAKE_PY_MISSING);
# the job writes its --device and --config to $FAKE_PY_ARGS and a trace
# with the mark 'measure', or fails as Python does without transformers
cat >"$tmp/python" <<'PY'
#!/bin/sh
if [ "$1" = -c ]; then echo "${FAKE_PY_MISSING:-}"; exit 0; fi
dev=meta config=
while [ $# -gt 0 ]; do
  case $1 in --device) dev=$2; shift ;; --config) config=$2; shift ;; esac
  shift
done
[ -n "${FAKE_PY_ARGS:-}" ] && printf '%s\n%s\n' "$dev" "$config" >"$FAKE_PY_ARGS"
if [ -n "${FAKE_PY_FAIL:-}" ]; then
  printf 'Traceback (most recent call last):\n  File "measure.py", line 1\n%s\n' "$FAKE_PY_FAIL" >&2
  exit 1
fi
printf 'a 1 %s %s\na 2 209715200 %s\nf 2\nm measure\na 3 52428800 %s\nf 3\n' \
  "${FAKE_PY_BYTES:-104857600}" "$dev" "$dev" "$dev" >"$VRAMLEDGER_TRACE"
PY
chmod +x "$tmp/python"
printf 'a 1 104857600 meta\na 2 209715200 meta\nf 2\nm measure\na 3 52428800 meta\nf 3\n' >"$tmp/dry.trace"
"$vl" trace --replay "$tmp/dry.trace" --from-mark measure --format json >"$tmp/dry-replay.json"
jq_py() { # jq_py FILE EXPR: print EXPR of the JSON in FILE (d)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($2)" "$1"
}
mkdir -p "$tmp/dtmp"
export VRAMLEDGER_PYTHON="$tmp/python" FAKE_PY_ARGS="$tmp/pyargs" TMPDIR="$tmp/dtmp"
est="$vl estimate --model gpt2 --seq 1024 --batch 4"

$est --precision bf16 --dry-run --format json >"$tmp/dry.json" 2>"$tmp/err"
check "dry run: it succeeds" [ $? = 0 ]
check "dry run: its peaks are the trace's from the mark 'measure'" python3 -c "
import json, sys
d, r = json.load(open('$tmp/dry.json'))['dry_run'], json.load(open('$tmp/dry-replay.json'))['replays'][0]
sys.exit((d['peak_allocated_bytes'], d['peak_reserved_bytes']) != (r['peak_allocated_bytes'], r['peak_reserved_bytes']))"
check "dry run: on meta tensors, complete" [ "$(jq_py "$tmp/dry.json" "d['dry_run']['device'], d['dry_run']['complete'], d['dry_run']['automatic']")" = "meta True False" ]
check "dry run: the job is measure.py's" grep -q "^meta$" "$tmp/pyargs"
$est --precision bf16 --format json >"$tmp/formula.json"
check "dry run: the formula's JSON is kept as it is" python3 -c "
import json, sys
a, b = json.load(open('$tmp/dry.json')), json.load(open('$tmp/formula.json'))
del a['dry_run']
sys.exit(a != b)"
check "dry run: the difference is the formula's from the dry run, in %" python3 -c "
import json, sys
d = json.load(open('$tmp/dry.json')); r = d['dry_run']
want = 100 * (d['peak_allocated_bytes'] - r['peak_allocated_bytes']) / r['peak_allocated_bytes']
sys.exit(abs(r['formula_vs_dry_run_pct']['peak_allocated'] - want) > 0.01)"
check "dry run: config: the bundled model's file, the job's settings" python3 -c "
import json, sys
c = json.loads(open('$tmp/pyargs').read().split('\n')[1])
sys.exit(not (c['model'].endswith('/data/models/gpt2.json') and c['task'] == 'train' and
              (c['precision'], c['batch'], c['seq'], c['optimizer'], c['optimizer_impl'],
               c['attention'], c['checkpointing'], c['grad_accum'], c['lora']) ==
              ('bf16', 4, 1024, 'adamw', 'foreach', 'sdpa', 'none', 1, 0)))"
$est --precision fp32 --optimizer sgd-momentum --optimizer-impl forloop --attention eager \
  --checkpointing full --grad-accum 2 --lora-rank 8 --lora-targets c_attn,c_fc --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: config: every setting it maps" python3 -c "
import json, sys
c = json.loads(open('$tmp/pyargs').read().split('\n')[1])
sys.exit((c['precision'], c['optimizer'], c['optimizer_impl'], c['attention'], c['checkpointing'],
          c['grad_accum'], c['lora'], c['lora_targets']) !=
         ('fp32', 'sgd-momentum', 'forloop', 'eager', 'full', 2, 8, 'c_attn,c_fc'))"
check "dry run: text: the block with units and the formula's difference" \
  grep -Eq "^  peak allocated +0\.15 GiB   formula [0-9.]+ GiB \([+-][0-9.]+ %\)$" "$tmp/out"
check "dry run: text: its heading" grep -q "^  dry run (meta tensors, PyTorch's own modules)" "$tmp/out"
$vl estimate --model gpt2 --task infer --seq 256 --batch 2 --new-tokens 16 --dry-run >/dev/null 2>"$tmp/err"
check "dry run: config: generate() with its prompt and new tokens" python3 -c "
import json, sys
c = json.loads(open('$tmp/pyargs').read().split('\n')[1])
sys.exit((c['task'], c['batch'], c['seq'], c['new_tokens'], c['precision']) != ('infer', 2, 256, 16, 'bf16'))"
$est --dry-run >/dev/null 2>"$tmp/err"
check "dry run: autocast runs on the CPU" grep -q "^cpu$" "$tmp/pyargs"
check "dry run: and says so" grep -q "amp-bf16 needs autocast.*computes on the CPU" "$tmp/err"
FAKE_PY_BYTES=$((30 << 30)) $est --precision bf16 --gpu l4 --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: out of the card's memory in the replay: exit 3" [ $? = 3 ]
check "dry run: and said" grep -q "l4: the replay ran out of its memory: does not fit" "$tmp/out"

FAKE_PY_FAIL="ModuleNotFoundError: No module named 'transformers'" \
  $est --precision bf16 --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: a job that fails fails" [ $? = 1 ]
check "dry run: with no number" [ ! -s "$tmp/out" ]
check "dry run: naming the cause" grep -q "error: the dry run of 'gpt2' failed (the trace exited with status 1): ModuleNotFoundError: No module named 'transformers'" "$tmp/err"
check "dry run: and what it needs" grep -q "needs a Python with torch and transformers" "$tmp/err"
FAKE_PY_MISSING="transformers" $est --precision bf16 --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: a Python without transformers is said before the job" sh -c "[ $? = 1 ] && [ ! -s '$tmp/out' ] && grep -q 'cannot import transformers' '$tmp/err'"
VRAMLEDGER_PYTHON=/usr/bin/python3-nonexistent $est --precision bf16 --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: a Python that does not run is said" grep -q "'/usr/bin/python3-nonexistent' does not run" "$tmp/err"
$est --precision bf16 --tp 2 --dry-run >"$tmp/out" 2>"$tmp/err"
check "dry run: a setting it cannot express is refused by name" sh -c "[ $? = 2 ] && [ ! -s '$tmp/out' ] && grep -q 'cannot express --tp' '$tmp/err'"

# a model_type nobody described: dry-run on its own where it can be
cases="$dir/cases/bad"
$vl estimate --model "$cases/newlm.json" --batch 2 --seq 128 --precision bf16 --format json >"$tmp/out" 2>"$tmp/err"
check "unknown type: dry-run on its own, said" grep -q "note: model_type 'newlm' is not described: a dry run builds it" "$tmp/err"
check "unknown type: the approximate estimate and the dry run" [ "$(jq_py "$tmp/out" "d['approximate'], d['dry_run']['automatic']")" = "True True" ]
$vl estimate --model "$cases/mamba.json" --precision bf16 --format json >"$tmp/out" 2>"$tmp/err"
check "unknown type without the usual keys: the dry run answers" sh -c "[ $? = 0 ] && [ \"\$(python3 -c \"import json; d = json.load(open('$tmp/out')); print(d['model']['model_type'], d['dry_run']['peak_allocated_bytes'])\")\" = 'mamba 157286400' ]"
FAKE_PY_MISSING="torch, transformers" $vl estimate --model "$cases/mamba.json" --precision bf16 >"$tmp/out" 2>"$tmp/err"
check "unknown type, no torch: refused, pointing to --dry-run and what it needs" sh -c "[ $? = 1 ] && [ ! -s '$tmp/out' ] && grep -q 'with --dry-run: it needs a Python with torch and transformers' '$tmp/err'"
FAKE_PY_FAIL="NotImplementedError: meta" $vl estimate --model "$cases/newlm.json" --batch 2 --seq 128 --precision bf16 >"$tmp/out" 2>"$tmp/err"
check "unknown type: a failed dry run leaves the approximate estimate, said" sh -c "[ $? = 0 ] && grep -q 'approximate: model_type' '$tmp/out' && ! grep -q 'dry run (' '$tmp/out' && grep -q 'NotImplementedError: meta; the approximate estimate follows' '$tmp/err'"
$vl estimate --model "$cases/newlm.json" --batch 2 --seq 128 >"$tmp/out" 2>"$tmp/err"
check "unknown type under autocast: not on its own (the CPU computes)" sh -c "[ $? = 0 ] && ! grep -q 'dry run (' '$tmp/out' && grep -q 'amp-bf16 runs on the CPU' '$tmp/err'"
check "dry run: its folders are removed" [ -z "$(ls -A "$tmp/dtmp")" ]
unset VRAMLEDGER_PYTHON FAKE_PY_ARGS TMPDIR


echo "$n checks, $fail failed"
[ $fail = 0 ]
