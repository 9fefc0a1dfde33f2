#!/bin/sh
# `vramledger run` and `report` end to end, with a fake NVML and the
# interposer on stub CUDA libraries: exit status, signals, a missing
# command, the layers of a record, kill -9 of the job and of vramledger.
set -u
vl=$1 prog=$2 fake=$3 preload=$4 stub=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$preload" LD_LIBRARY_PATH="$stub"
dir=$(cd "$(dirname "$0")" && pwd)
fail=0
n=0
check() { # check NAME CONDITION...
  name=$1
  shift
  n=$((n + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=$((fail + 1)); fi
}
json() { # json DIR KEY VALUE: the report's JSON has "KEY": VALUE
  "$vl" report "$1" --format json | grep -q "\"$2\": $3"
}

"$vl" run --out "$tmp/exit7" --quiet -- sh -c 'exit 7'
check "exit status passes through" [ $? = 7 ]
check "record has the exit status" json "$tmp/exit7" exit_status 7
check "run directory is 0700" [ "$(stat -c %a "$tmp/exit7")" = 700 ]
check "record is 0600" [ "$(stat -c %a "$tmp/exit7/record.jsonl")" = 600 ]

"$vl" run --out "$tmp/missing" --quiet -- /nonexistent/command 2>"$tmp/err"
check "missing command gives 127" [ $? = 127 ]
check "missing command is named" grep -q "cannot run '/nonexistent/command'" "$tmp/err"

"$vl" run --out "$tmp/exit7" --quiet -- true 2>"$tmp/err"
check "an existing record is never overwritten" [ $? = 1 ]

"$vl" run --out "$tmp/term" --quiet -- sh -c 'kill -TERM $$'
check "death by signal gives 128 + signal" [ $? = 143 ]

"$vl" run --out "$tmp/fwd" --quiet -- sleep 30 &
vlpid=$!
sleep 0.5
kill -TERM $vlpid
wait $vlpid
check "TERM sent to vramledger reaches the command" [ $? = 143 ]

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
check "the mark is recorded" grep -q '"name":"holding"' "$tmp/hold/record.jsonl"
check "the CUDA driver version is recorded" grep -q '"cuda_driver":"13.0"' "$tmp/hold/record.jsonl"
check "samples every 10 ms" sh -c "[ \$(grep -c '\"type\":\"sample\"' '$tmp/hold/record.jsonl') -ge 20 ]"
"$vl" report "$tmp/hold" --format trace >"$tmp/trace.json"
check "trace is Chrome trace JSON" grep -q '"traceEvents"' "$tmp/trace.json"

: >"$tmp/procs"
FAKE_NVML_OLD=1 "$vl" run --out "$tmp/old" --interval-ms 10 --quiet -- "$prog" hold 64 0.3 "$tmp/procs"
check "NVML v1 fallbacks give the same peak" json "$tmp/old" process_bytes 591396864

: >"$tmp/procs"
FAKE_NVML_GPUS=2 CUDA_VISIBLE_DEVICES=1 "$vl" run --out "$tmp/vis" --quiet -- true
check "CUDA_VISIBLE_DEVICES selects the GPUs" sh -c "'$vl' report '$tmp/vis' --format json | grep -q 'Fake GPU 1' && ! '$vl' report '$tmp/vis' --format json | grep -q 'Fake GPU 0'"

VRAMLEDGER_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$vl" run --out "$tmp/nonvml" -- sh -c 'exit 3' 2>"$tmp/err"
check "without NVML the command still runs" [ $? = 3 ]
check "without NVML a note says so" grep -q "without GPU samples" "$tmp/err"
check "without NVML the report says so" sh -c "'$vl' report '$tmp/nonvml' --format json | grep -q no-nvml"

"$vl" run --out "$tmp/orphan" --interval-ms 10 --quiet -- "$prog" orphan
check "a child's allocations count while it lives" json "$tmp/orphan" cuda_alloc_bytes 33554432
check "and not after it exits" sh -c "grep '\"type\":\"sample\"' '$tmp/orphan/record.jsonl' | tail -1 | grep -q '\"cuda_alloc_bytes\":0'"

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
check "python: vramledger.mark() stamps the record" [ "$(grep -c '"name":"step"' "$tmp/pymark/record.jsonl")" = 4 ]
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
"$vl" run --out "$tmp/guardpy" --interval-ms 10 --quiet --commitment "$dir/../data/commitments/guard-256mib.json" -- sh -c "'$prog' hold 64 1.0 '$tmp/procs' & sleep 0.6; python3 -c \"import sys; sys.path.insert(0, '$pydir'); import vramledger; sys.exit(0 if vramledger.fallback_requested() else 5)\"; st=\$?; wait; exit \$st"
check "guard: vramledger.fallback_requested() sees it" [ $? = 0 ]
: >"$tmp/procs"
"$vl" run --out "$tmp/guardsig" --interval-ms 10 --quiet --commitment "$dir/../data/commitments/guard-256mib.json" --trigger-signal USR1 -- sh -c "trap 'echo got > $tmp/sig' USR1; '$prog' hold 64 1.0 '$tmp/procs' & wait; wait" 2>/dev/null
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

"$vl" run --out "$tmp/kill9job" --quiet -- sh -c 'kill -9 $$'
check "kill -9 of the job gives 137" [ $? = 137 ]
check "and its record is complete" json "$tmp/kill9job" exit_status 137

: >"$tmp/procs"
"$vl" run --out "$tmp/kill9vl" --interval-ms 10 --quiet -- "$prog" hold 16 1.0 "$tmp/procs" &
vlpid=$!
sleep 0.4
kill -9 $vlpid
wait $vlpid 2>/dev/null
sleep 0.8 # the orphaned job finishes
check "kill -9 of vramledger leaves a readable record" json "$tmp/kill9vl" exit_status null
check "with its samples" sh -c "[ \$(grep -c '\"type\":\"sample\"' '$tmp/kill9vl/record.jsonl') -ge 5 ]"

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

echo "$n checks, $fail failed"
[ $fail = 0 ]
