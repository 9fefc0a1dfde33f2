#!/bin/sh
# The fault-injection suite: vramledger and its job under a disk that
# fills up, file size and address space limits, symbolic links where it
# writes, a job that changes directory, closes its descriptors and forks
# hundreds of processes, signals to its process group, Ctrl-C while run
# waits for the processes a job left running, a 200 MiB record,
# slow and split HTTP requests, and hostile strings in what renderers
# print. Each case asserts the outcome: nothing followed, nothing lost
# beyond what the record itself says, the job's exit status intact. One
# line per case: PASS or FAIL, with the outcomes asserted (FAIL: those
# that were not met).
# Usage: run.sh VRAMLEDGER PRELOAD_TEST TABLE_TEST FAKE_NVML PRELOAD STUB_DIR
#               FULL_DISK HTTP_GET DATA_DIR [CASE...]
# A job given as sh -c "PROGRAM ... && exit N" exits N only when PROGRAM
# succeeded: a PROGRAM killed (by a SIGXFSZ of the interposer's write, say)
# shows in the status asserted.
set -u
vl=$1 prog=$2 table=$3 fake=$4 pre=$5 stub=$6 full_so=$7 http=$8 data=$9
shift 9
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
mounts="" # the small tmpfs mounts of the counters cases
trap 'for m in $mounts; do umount "$m" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
tmp=$(cd "$tmp" && pwd -P) # the full disk matches real paths
export VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$pre" LD_LIBRARY_PATH="$stub"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" # the full disk before ASan's
exe=$(basename "$vl")
rec() { python3 "$here/record.py" "$@"; }
# all RECORD: the record's own file and its streams (docs/record.md, "Streams")
all() { cat "$1" "${1%.jsonl}.d/"*.jsonl 2>/dev/null; }
. "$here/../cli/watch_port.sh" # watch_port ERRFILE

# Waits on events, not on the clock: each waits for something the case can
# see, 60 s at most however busy the machine, and fails when it never came.
# sampled RECORD [N]: RECORD has N sample lines (1): run has started the
# job and handles its signals (the sampler starts after both)
sampled() {
  i=0
  while [ "$(cat "$1" 2>/dev/null | grep -c '"type":"sample"')" -lt "${2:-1}" ]; do
    [ $i -ge 1200 ] && return 1
    sleep 0.05
    i=$((i + 1))
  done
}
# gone PID: the process has ended
gone() {
  i=0
  while kill -0 "$1" 2>/dev/null; do
    [ $i -ge 1200 ] && return 1
    sleep 0.05
    i=$((i + 1))
  done
}
# taken PID SIGNUM: PID has no SIGNUM pending (its handler has it), so that
# another sent after it is not merged into it
taken() {
  i=0
  while :; do
    pnd=$(awk '$1 == "SigPnd:" || $1 == "ShdPnd:" { printf "0x%s ", $2 }' "/proc/$1/status" 2>/dev/null)
    [ -n "$pnd" ] || return 1
    set -- "$1" "$2" $pnd
    [ $(($3 & (1 << ($2 - 1)))) = 0 ] && [ $(($4 & (1 << ($2 - 1)))) = 0 ] && return 0
    [ $i -ge 1200 ] && return 1
    sleep 0.05
    i=$((i + 1))
  done
}

# begin NAME; expect OUTCOME CONDITION... (one asserted outcome); end:
# the case's line
passed=0 failed=0 skipped=0
begin() { name=$1 ok="" bad=""; }
expect() {
  what=$1
  shift
  if "$@"; then ok="$ok; $what"; else bad="$bad; $what"; fi
}
end() {
  if [ -z "$bad" ] && [ -z "$ok" ]; then # nothing was checked: not a pass
    echo "SKIP $name"
    skipped=$((skipped + 1))
  elif [ -z "$bad" ]; then
    echo "PASS $name: ${ok#; }"
    passed=$((passed + 1))
  else
    echo "FAIL $name: not ${bad#; }"
    failed=$((failed + 1))
  fi
}
eq() { [ "$1" = "$2" ] || { echo "  $name: '$1' != '$2'" >&2; return 1; }; }
selected="$*"
want() { # want CASE: run it (every case when none was named)
  [ -z "$selected" ] && return 0
  for c in $selected; do [ "$c" = "$1" ] && return 0; done
  return 1
}

# full NAME VAR=VALUE... -- ARGS...: `vramledger ARGS` on a disk that is
# full for writes into $tmp/NAME (tests/fake/full_disk.c), its log in
# $tmp/NAME.log, its stderr in $tmp/NAME.err; $st its exit status
full() {
  d=$1
  shift
  mkdir -p "$tmp/$d"
  env LD_PRELOAD="$full_so" FAULT_FULL_DIR="$tmp/$d" FAULT_FULL_LOG="$tmp/$d.log" "$@" \
    2>"$tmp/$d.err"
  st=$?
  touch "$tmp/$d.log"
}
# logged WHO KINDS COLUMN: the sum of COLUMN (6 lost bytes, 7 samples) of
# the full disk's log lines of WHO (an executable, or "job": the others)
logged() {
  awk -v who="$1" -v kinds=" $2 " -v c="$3" -v me="$exe" '
    (who == "job" ? $2 != me : $2 == who) && index(kinds, " " $3 " ") { s += $c }
    END { print s + 0 }' "$tmp/$d.log"
}
# the stderr's "N bytes of the record lost"
said_lost() { sed -n 's/.*: \([0-9]*\) bytes of the record lost.*/\1/p' "$tmp/$d.err"; }

if want enospc-cut; then
  begin enospc-cut
  full cut FAULT_FULL_AT=4096 FAULT_FULL_PARTIAL=1 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/cut" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8 && exit 5"
  r=$tmp/cut/record.jsonl
  expect "the job's status (5)" eq "$st" 5
  expect "a short write cut a line" eq "$(awk '$3 == "cut"' "$tmp/cut.log" | wc -l)" 1
  expect "the record reads" sh -c "'$vl' report '$tmp/cut' --format json >/dev/null"
  expect "one gap line" eq "$(rec "$r" gaps)" 1
  expect "its lost bytes are the ones not written" eq "$(rec "$r" gap-bytes)" "$(logged "$exe" "cut refused" 6)"
  expect "stderr says as many" eq "$(said_lost)" "$(rec "$r" gap-bytes)"
  expect "every sample written or in the gap" \
    eq "$(rec "$r" exit-samples)" "$(($(rec "$r" samples) + $(logged "$exe" "cut refused" 7)))"
  expect "samples after the gap" [ "$(rec "$r" after-gap)" -gt 10 ]
  expect "the exit event last, with the status" eq "$(rec "$r" last-type) $(rec "$r" exit-status)" "exit 5"
  end
fi

if want enospc-whole; then
  begin enospc-whole
  full whole FAULT_FULL_AT=4096 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/whole" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8 && exit 6"
  r=$tmp/whole/record.jsonl
  expect "the job's status (6)" eq "$st" 6
  expect "a write refused whole" eq "$(awk '$3 == "refused"' "$tmp/whole.log" | wc -l)" 1
  expect "no line cut" eq "$(rec "$r" cut)" 0
  expect "its bytes in the gap line" eq "$(rec "$r" gap-bytes)" "$(logged "$exe" refused 6)"
  expect "stderr says as many" eq "$(said_lost)" "$(rec "$r" gap-bytes)"
  expect "every sample written or in the gap" \
    eq "$(rec "$r" exit-samples)" "$(($(rec "$r" samples) + $(logged "$exe" refused 7)))"
  expect "report's finding gap" sh -c "'$vl' report '$tmp/whole' --format json | grep -q '\"gap\"'"
  end
fi

if want enospc-long; then
  begin enospc-long
  full long FAULT_FULL_AT=4096 FAULT_FULL_PARTIAL=1 FAULT_FULL_REFUSE=5 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/long" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8 && exit 7"
  r=$tmp/long/record.jsonl
  expect "the job's status (7)" eq "$st" 7
  expect "gap lines refused too" [ "$(awk '$3 == "gap"' "$tmp/long.log" | wc -l)" -ge 1 ]
  expect "one gap line once there is room" eq "$(rec "$r" gaps)" 1
  missing=$(($(rec "$r" exit-samples) - $(rec "$r" samples)))
  expect "samples missing ($missing)" [ "$missing" -gt 0 ]
  expect "the gap's bytes at least those refused" [ "$(rec "$r" gap-bytes)" -ge "$(logged "$exe" "cut refused" 6)" ]
  expect "and at least 150 bytes a missing sample" [ "$(rec "$r" gap-bytes)" -ge $((missing * 150)) ]
  expect "stderr says as many" eq "$(said_lost)" "$(rec "$r" gap-bytes)"
  end
fi

if want enospc-never; then
  begin enospc-never
  full never FAULT_FULL_AT=4096 FAULT_FULL_PARTIAL=1 \
    "$vl" run --out "$tmp/never" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.5 && exit 8"
  r=$tmp/never/record.jsonl
  expect "the job's status (8)" eq "$st" 8
  expect "the record ends in the cut line" eq "$(rec "$r" last-type)" cut
  expect "stderr says the bytes lost" [ "$(said_lost)" -gt 0 ]
  expect "the record reads, cut at its end" \
    sh -c "'$vl' report '$tmp/never' --format json | grep -q '\"truncated\": true'"
  end
fi

if want enospc-job; then
  # every writer of the record on the full disk (the interposer in the
  # job too: two processes' streams past the size with their marks), room
  # again once the job says so
  begin enospc-job
  full job FAULT_FULL_AT=1200 FAULT_FULL_ROOM="$tmp/job.room" \
    "$vl" run --out "$tmp/job" --interval-ms 10 --quiet -- \
    sh -c "'$prog' marks 40 && '$prog' hold 8 0.5 && : >'$tmp/job.room' && sleep 0.3 && exit 9"
  r=$tmp/job/record.jsonl
  expect "the job's status (9)" eq "$st" 9
  expect "the interposer's lines refused" [ "$(logged job refused 6)" -gt 0 ]
  expect "the record says the job's bytes lost" eq "$(rec "$r" lost-record)" "$(logged job "refused gap" 6)"
  expect "and vramledger's in its gap" \
    [ "$(rec "$r" gap-bytes)" -ge $(($(logged "$exe" refused 6) + $(rec "$r" lost-record))) ]
  expect "report's finding says both" sh -c "'$vl' report '$tmp/job' | grep -q 'gap'"
  end
fi

if want enospc-others; then
  # the disk full for vramledger alone, never room again: its cut line
  # ends its file, and the job's lines go on in their own streams
  begin enospc-others
  full others FAULT_FULL_AT=4096 FAULT_FULL_PARTIAL=1 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/others" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.5 && exit 10"
  r=$tmp/others/record.jsonl
  expect "the job's status (10)" eq "$st" 10
  expect "vramledger's line cut" eq "$(awk '$3 == "cut"' "$tmp/others.log" | wc -l)" 1
  expect "the job's marks after it" eq "$(rec "$r" marks step)" 5
  expect "the cut line stands alone" eq "$(rec "$r" cut)" 1
  expect "the record reads" sh -c "'$vl' report '$tmp/others' --format json >/dev/null"
  end
fi

if want enospc-job-cut; then
  # the job's interposer cut by the full disk (its stream past the size
  # with its marks), room again after: its stream goes on past its cut
  # line, which the lost event counts
  begin enospc-job-cut
  full jobcut FAULT_FULL_AT=1500 FAULT_FULL_PARTIAL=1 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE=preload_test \
    "$vl" run --out "$tmp/jobcut" --interval-ms 10 --quiet -- sh -c "'$prog' marks 40 solo && exit 11"
  r=$tmp/jobcut/record.jsonl
  expect "the job's status (11)" eq "$st" 11
  expect "the job's line cut" eq "$(awk '$3 == "cut"' "$tmp/jobcut.log" | wc -l)" 1
  expect "the record says its bytes" eq "$(rec "$r" lost-record)" "$(logged job "cut refused gap" 6)"
  expect "the interposer's next line closes its cut one" [ "$(rec "$r" closings)" -ge 1 ]
  expect "the cut line stands alone" eq "$(rec "$r" cut)" 1
  expect "the record reads to its exit" sh -c "'$vl' report '$tmp/jobcut' --format json | grep -q '\"exit_status\": 11'"
  end
fi

if want probe-enospc; then
  # the probe's writes in a Python job ($FAULT_TORCH_PYTHON, a Python with
  # torch) on the full disk, one of its lines cut, room again after: it
  # stays on, the cut line stands alone, its gap line counts what it lost
  begin probe-enospc
  tpy=${FAULT_TORCH_PYTHON:-}
  if [ -n "$tpy" ] && "$tpy" -c 'import torch' 2>/dev/null; then
    pexe=$("$tpy" -c 'import os, sys; print(os.path.basename(os.path.realpath(sys.executable)))')
    full probe FAULT_FULL_AT=2048 FAULT_FULL_PARTIAL=1 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE="$pexe" \
      "$vl" run --no-preload --out "$tmp/probe" --interval-ms 10000 --quiet -- \
      sh -c "'$tpy' '$here/../python/job_train.py' sgd-momentum 1 5 >/dev/null && exit 12"
    r=$tmp/probe/record.jsonl
    expect "the job's status (12)" eq "$st" 12
    expect "a short write cut the probe's line" \
      eq "$(awk -v e="$pexe" '$2 == e && $3 == "cut"' "$tmp/probe.log" | wc -l)" 1
    expect "the cut line stands alone" eq "$(rec "$r" cut)" 1
    expect "the record reads, its finding gap" \
      sh -c "'$vl' report '$tmp/probe' --format json | grep -q '\"gap\"'"
    expect "the probe's gap line" eq "$(rec "$r" probe-gaps)" 1
    expect "its bytes the ones not written" \
      eq "$(rec "$r" probe-gap-bytes)" "$(logged "$pexe" "cut refused" 6)"
    expect "the probe on to the last step, never stopped" \
      eq "$(all "$r" | grep -c '"type":"step".*"step":5,') $(all "$r" | grep -c 'probe stopped')" "1 0"
    expect "said once on the job's stderr" eq "$(grep -c 'the probe cannot write' "$tmp/probe.err")" 1
  else
    echo "  probe-enospc: left out (no Python with torch in FAULT_TORCH_PYTHON)" >&2
  fi
  end
fi

if want own-preload; then
  # a job with an LD_PRELOAD of its own that wraps write() (as the full
  # disk does), behind the interposer: its dlsym(RTLD_NEXT) gets libc's
  begin own-preload
  LD_PRELOAD="$full_so" timeout 20 "$vl" run --out "$tmp/own" --quiet -- sh -c "'$prog' hold 1 0.1 && echo ran && exit 13" >"$tmp/own.out"
  expect "the job's status (13)" eq "$?" 13
  expect "its output" eq "$(cat "$tmp/own.out")" ran
  expect "its marks in the record" eq "$(rec "$tmp/own/record.jsonl" marks step)" 5
  end
fi

if want ulimit-f; then
  # the file size limit (20 KiB: the counters file, 10 KiB, fits) reached
  # by the record: vramledger and the job's interposer live on (the
  # SIGXFSZ of their writes is theirs to ignore), the loss is said
  begin ulimit-f
  sh -c "ulimit -f 40; exec '$vl' run --out '$tmp/fsz' --interval-ms 1 --quiet -- sh -c \"'$prog' marks 400 solo && '$prog' hold 8 0.5 && exit 3\"" \
    2>"$tmp/fsz.err"
  st=$?
  r=$tmp/fsz/record.jsonl
  expect "the job's status (3), its marks past the limit not fatal" eq "$st" 3
  expect "the record at the limit" [ "$(wc -c <"$r")" -le 20480 ]
  expect "vramledger's loss said, with the file" \
    grep -q "cannot write '.*/fsz/record.jsonl': File too large: [0-9]* bytes of the record lost" "$tmp/fsz.err"
  expect "the job's lines lost said" grep -q "bytes of the job's lines .* lost" "$tmp/fsz.err"
  expect "the record reads" sh -c "'$vl' report '$tmp/fsz' --format json >/dev/null"
  end
fi

if want ulimit-v; then
  # the address space limited: the job's interposer cannot track more
  # (said, counted), and vramledger runs in little
  begin ulimit-v
  "$vl" run --out "$tmp/as" --quiet -- "$table" full-child >"$tmp/as.out" 2>"$tmp/as.err"
  st=$?
  expect "the job's status (0) and its calls all succeeded" eq "$st" 0
  expect "said once on the job's stderr" eq "$(grep -c 'no memory to track' "$tmp/as.err")" 1
  expect "the record counts the allocations not tracked" \
    grep -q "\"uncounted_allocs\":$((200000 - $(cat "$tmp/as.out")))," "$tmp/as/record.jsonl"
  expect "report's finding uncounted" sh -c "'$vl' report '$tmp/as' | grep -q '\[uncounted\]'"
  if ldd "$vl" | grep -q libasan; then
    echo "  ulimit-v: vramledger itself under ulimit -v left out (a sanitizer's shadow memory)" >&2
  else
    sh -c "ulimit -v 40000; exec '$vl' run --out '$tmp/as2' --interval-ms 10 --quiet -- sh -c \"'$prog' hold 1 0.2 && exit 4\"" 2>"$tmp/as2.err"
    expect "vramledger under ulimit -v 40000: the job's status (4)" eq "$?" 4
    expect "and a whole record" eq "$(rec "$tmp/as2/record.jsonl" exit-status)" 4
  fi
  end
fi

# backed FILE: every page of FILE has its disk blocks (none sparse)
backed() { [ $(($(stat -c %b "$1") * 512)) -ge "$(stat -c %s "$1")" ]; }
# small NAME KIB [FREE_KIB [OPTIONS]]: a tmpfs of KIB at $tmp/NAME
# (unmounted by unmount_small, or at exit), filled up to FREE_KIB left when
# given (not empty), mounted with OPTIONS too; as root only: else the
# reason is printed and the case is left out
small() {
  mkdir -p "$tmp/$1"
  if ! mount -t tmpfs -o "size=${2}k${4:+,$4}" tmpfs "$tmp/$1" 2>"$tmp/$1.mount"; then
    echo "  $name: skipped: cannot mount a tmpfs ($(cat "$tmp/$1.mount"); CI runs as root)" >&2
    return 1
  fi
  mounts="$mounts $tmp/$1"
  [ -z "${3:-}" ] || dd if=/dev/zero of="$tmp/$1/fill" bs=1k count=$(($2 - $3)) 2>/dev/null
  return 0
}
unmount_small() { umount "$tmp/$1"; }
# the job for the counters cases: processes that allocate one after the
# other, then exit 5 (a process killed, by a SIGBUS say, exits 1 first)
counting_job="for i in 1 2 3 4; do '$prog' hold 8 0.05 || exit 1; done; exit 5"

if want counters-tmpfs; then
  # the run directory on a 256 KiB tmpfs with 40 KiB free: no room for
  # the counters' 768 KiB of rings; the header, its pages given, is
  # counted into by every process of the job
  begin counters-tmpfs
  if small shm1 256 40; then
    "$vl" run --out "$tmp/shm1/r" --interval-ms 10 -- sh -c "$counting_job" 2>"$tmp/shm1.err"
    st=$? r=$tmp/shm1/r/record.jsonl
    expect "the job's status (5)" eq "$st" 5
    expect "the counters file has its blocks" backed "$tmp/shm1/r/counters"
    expect "the record says no rings" eq "$(rec "$r" meta counters)" "no rings: No space left on device"
    expect "stderr says so" grep -q "counters file '.*/shm1/r/counters' has no room for its rings" "$tmp/shm1.err"
    expect "the processes counted" [ "$(rec "$r" alloc-peak)" = 8388608 ]
    unmount_small shm1
  fi
  end
fi

if want counters-tmpfs-full; then
  # 8 KiB free: not even the counters' header (12 KiB) has room; the run
  # goes on without the file, on NVML alone, and says so (a sparse header
  # was a SIGBUS of vramledger's own at its first write)
  begin counters-tmpfs-full
  if small shm2 256 8; then
    "$vl" run --out "$tmp/shm2/r" --interval-ms 10 -- sh -c "$counting_job" 2>"$tmp/shm2.err"
    st=$? r=$tmp/shm2/r/record.jsonl
    expect "the job's status (5)" eq "$st" 5
    expect "no counters file" [ ! -e "$tmp/shm2/r/counters" ]
    expect "the record says why" eq "$(rec "$r" meta counters)" "off: No space left on device"
    expect "stderr says so" grep -q "warning: cannot make the counters file '.*/shm2/r/counters': No space left on device: the job runs" "$tmp/shm2.err"
    rm -rf "$tmp/shm2/r"
    dd if=/dev/zero of="$tmp/shm2/fill2" bs=1k 2>/dev/null
    "$vl" run --out "$tmp/shm2/r" --interval-ms 10 -- sh -c "$counting_job" 2>"$tmp/shm2.err"
    st=$?
    expect "no room at all: no signal of vramledger's ($st)" [ "$st" -lt 128 ]
    expect "nothing recorded, said" grep -q "cannot write '.*/shm2/r/record.jsonl': No space left on device: nothing is recorded" "$tmp/shm2.err"
    unmount_small shm2
  fi
  end
fi

if want counters-tmpfs-filling; then
  # a 1 MiB tmpfs that the job fills up while it runs: the counters' pages
  # were all given at the start, the processes after the filling count
  # into them as before
  begin counters-tmpfs-filling
  if small shm3 1024; then
    "$vl" run --out "$tmp/shm3/r" --interval-ms 10 -- sh -c "'$prog' hold 8 0.05 || exit 1
      dd if=/dev/zero of='$tmp/shm3/fill' bs=4k 2>/dev/null
      df -k '$tmp/shm3' | awk 'NR == 2 { print \$4 }' >'$tmp/shm3.avail'; $counting_job" 2>"$tmp/shm3.err"
    st=$? r=$tmp/shm3/r/record.jsonl
    expect "the job's status (5)" eq "$st" 5
    expect "the disk full in the job" eq "$(cat "$tmp/shm3.avail")" 0
    expect "the counters with their rings, every block" backed "$tmp/shm3/r/counters"
    expect "of 780 KiB" eq "$(stat -c %s "$tmp/shm3/r/counters")" 798720
    expect "the record says on" eq "$(rec "$r" meta counters)" on
    expect "the loss of the record said" grep -q "bytes of the record lost" "$tmp/shm3.err"
    unmount_small shm3
  fi
  end
fi

if want enospc-tmpfs; then
  # a real full disk: the run directory on a 256 KiB tmpfs that the run
  # fills up and that never has room again; the room run kept from its
  # start takes the record's last lines: the gap line owed, the lost
  # event, the exit event
  begin enospc-tmpfs
  if small tmpfs 256; then
    d=tmpfs
    "$vl" run --out "$tmp/tmpfs/r" --interval-ms 1 --quiet -- sh -c "'$prog' hold 8 1.5 && exit 5" \
      2>"$tmp/tmpfs.err"
    expect "the job's status (5)" eq "$?" 5
    r=$tmp/tmpfs/r/record.jsonl
    expect "the disk filled" grep -q "No space left on device: [0-9]* bytes of the record lost" "$tmp/tmpfs.err"
    expect "stderr says the job's status" grep -q "the job exited with status 5" "$tmp/tmpfs.err"
    expect "samples missing" [ "$(rec "$r" exit-samples)" -gt "$(rec "$r" samples)" ]
    expect "the exit event last, with the status" eq "$(rec "$r" last-type) $(rec "$r" exit-status)" "exit 5"
    expect "vramledger's bytes lost in the gap line, as stderr says" eq "$(rec "$r" gap-bytes)" "$(said_lost)"
    job=$(sed -n "s/.*: \([0-9]*\) bytes of the job's lines.*/\1/p" "$tmp/tmpfs.err")
    expect "the job's in the lost event, as stderr says" eq "$(rec "$r" lost-record)" "${job:-0}"
    "$vl" report "$tmp/tmpfs/r" >"$tmp/tmpfs.txt"
    expect "report: the exit status, not a kill" grep -q "exit status 5$" "$tmp/tmpfs.txt"
    expect "report: the disk was full, every byte and the sample lines lost" \
      grep -q "\[gap\] the disk was full: at least [0-9]* KiB ($(($(said_lost) + ${job:-0})) bytes) and \
$(($(rec "$r" exit-samples) - $(rec "$r" samples))) sample lines" "$tmp/tmpfs.txt"
    unmount_small tmpfs
  fi
  end
fi

if want enospc-start; then
  # no room at all at the start: nothing can be recorded, and the job
  # still runs, as without vramledger (its environment untouched), its
  # output, exit status and death by signal intact; a place the user may
  # not write in (a read-only file system) is still refused
  begin enospc-start
  if small nospace 256 0; then
    job="echo out; echo err >&2; echo \"\${VRAMLEDGER_RECORD:-none} \${LD_PRELOAD:-none}\"; exit 5"
    "$vl" run --out "$tmp/nospace/r" --interval-ms 10 -- sh -c "$job" >"$tmp/nospace.out" 2>"$tmp/nospace.err"
    st=$?
    expect "the job's status (5)" eq "$st" 5
    expect "its output intact, no record or interposer in its environment" \
      eq "$(cat "$tmp/nospace.out")" "$(printf 'out\nnone none')"
    expect "its stderr intact" grep -qx err "$tmp/nospace.err"
    expect "stderr says nothing is recorded, and why" grep -q \
      "warning: cannot write '.*/nospace/r/record.jsonl': No space left on device: nothing is recorded" \
      "$tmp/nospace.err"
    expect "no counters warning besides" eq "$(grep -c 'counters file' "$tmp/nospace.err")" 0
    expect "the summary says no record" grep -q "^vramledger: no record (cannot write" "$tmp/nospace.err"
    expect "the run directory made gone" [ ! -e "$tmp/nospace/r" ]
    "$vl" run --out "$tmp/nospace/r" --quiet -- sh -c 'kill -TERM $$' 2>/dev/null
    expect "a job killed by TERM: vramledger dies of it (143)" eq "$?" 143
    (cd "$tmp/nospace" && "$vl" run --quiet -- sh -c 'exit 6' 2>/dev/null)
    expect "the default run directory: the job's status (6)" eq "$?" 6
    expect "and no run directory left" eq "$(ls "$tmp/nospace/runs" | wc -l)" 0
    unmount_small nospace
  fi
  if small noinode 256 "" nr_inodes=2; then # the root and one file: mkdir has no inode
    touch "$tmp/noinode/f"
    "$vl" run --out "$tmp/noinode/r" --quiet -- sh -c 'exit 7' 2>"$tmp/noinode.err"
    expect "no inode for the run directory: the job's status (7)" eq "$?" 7
    expect "stderr says so" grep -q "cannot write '.*/noinode/r': No space left on device: nothing is recorded" "$tmp/noinode.err"
    unmount_small noinode
  fi
  # `ulimit -f 0`: the record's first line is refused (EFBIG); the job's
  # output goes to a pipe (a file would be refused to the job too)
  mkdir "$tmp/fsize"
  out=$(sh -c "ulimit -f 0; exec '$vl' run --out '$tmp/fsize' --quiet -- sh -c 'echo ran; exit 8'" 2>&1)
  expect "ulimit -f 0: the job's status (8)" eq "$?" 8
  echo "$out" >"$tmp/fsize.out"
  expect "and its output" eq "$(grep -v '^vramledger: ' "$tmp/fsize.out")" ran
  expect "stderr says why" grep -q "record.jsonl': File too large: nothing is recorded" "$tmp/fsize.out"
  expect "the run directory given stays, emptied" eq "$(ls -A "$tmp/fsize" | wc -l)" 0
  if small rofs 64 "" ro; then
    "$vl" run --out "$tmp/rofs/r" -- sh -c "touch '$tmp/rofs.ran'" 2>"$tmp/rofs.err"
    expect "a read-only --out: refused (1)" eq "$?" 1
    expect "the job not run" [ ! -e "$tmp/rofs.ran" ]
    expect "stderr says why" grep -q "cannot create the run directory '.*/rofs/r': Read-only file system" "$tmp/rofs.err"
    unmount_small rofs
  fi
  end
fi

if want counters-enospc; then
  # an ordinary file system with 64 KiB of room at the start (posix_fallocate
  # refused past it, tests/fake/full_disk.c): the header alone, its blocks
  # given, never a sparse file; with 4 KiB, no file; where the file system
  # has no fallocate, zeros written (and refused past the room)
  begin counters-enospc
  full fa64 FAULT_FULL_FALLOCATE=65536 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/fa64" --interval-ms 10 -- sh -c "$counting_job"
  r=$tmp/fa64/record.jsonl
  expect "the job's status (5)" eq "$st" 5
  expect "the rings' blocks asked for and refused" grep -q " fallocate 798720 " "$tmp/fa64.log"
  expect "the header has its blocks" backed "$tmp/fa64/counters"
  expect "and no more" eq "$(stat -c %s "$tmp/fa64/counters")" 10280
  expect "the record says no rings" eq "$(rec "$r" meta counters)" "no rings: No space left on device"
  expect "the processes counted" [ "$(rec "$r" alloc-peak)" = 8388608 ]
  full fa4 FAULT_FULL_FALLOCATE=4096 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/fa4" --interval-ms 10 -- sh -c "$counting_job"
  expect "4 KiB: the job's status (5)" eq "$st" 5
  expect "no counters file" [ ! -e "$tmp/fa4/counters" ]
  expect "the record says why" eq "$(rec "$tmp/fa4/record.jsonl" meta counters)" "off: No space left on device"
  expect "stderr says so" grep -q "cannot make the counters file .*: the job runs" "$tmp/fa4.err"
  full zero FAULT_FULL_FALLOCATE=none FAULT_FULL_AT=65536 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/zero" --interval-ms 10 -- sh -c "$counting_job"
  expect "no fallocate: the job's status (5)" eq "$st" 5
  expect "zeros refused past the room" [ "$(awk '$3 == "refused"' "$tmp/zero.log" | wc -l)" = 1 ]
  expect "the header written whole" backed "$tmp/zero/counters"
  expect "the record says no rings" eq "$(rec "$tmp/zero/record.jsonl" meta counters)" "no rings: No space left on device"
  full zeros FAULT_FULL_FALLOCATE=none FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/zeros" --interval-ms 10 --quiet -- sh -c "$counting_job"
  expect "no fallocate, room: the rings written whole" backed "$tmp/zeros/counters"
  expect "780 KiB" eq "$(stat -c %s "$tmp/zeros/counters")" 798720
  expect "the record says on" eq "$(rec "$tmp/zeros/record.jsonl" meta counters)" on
  end
fi

if want counters-sparse; then
  # the interposer given a sparse counters file (an older run's, one made
  # by hand) or a short one refuses it: nothing counted there, said, the
  # program unharmed; on a full tmpfs the sparse one was its SIGBUS
  begin counters-sparse
  mkhead() { # mkhead FILE SIZE: the counters' header, the rest a hole
    python3 -c "
import struct, sys
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<IIIIII', 0x564c4354, 3, 256, 0, 0, 512))
    f.truncate(int(sys.argv[2]))" "$1" "$2"
  }
  slot0() { od -A n -t u4 -j 40 -N 4 "$1" | tr -d ' '; }
  mkhead "$tmp/sparse" 798720
  VRAMLEDGER_COUNTERS="$tmp/sparse" LD_PRELOAD="$pre" "$prog" hold 8 0.05 2>"$tmp/sparse.err"
  expect "the program's status (0)" eq "$?" 0
  expect "no slot taken in the file" eq "$(slot0 "$tmp/sparse")" 0
  expect "said once" eq "$(grep -c "counters file '$tmp/sparse' is shorter than 798720 bytes or sparse" "$tmp/sparse.err")" 1
  mkhead "$tmp/short" 4096
  VRAMLEDGER_COUNTERS="$tmp/short" LD_PRELOAD="$pre" "$prog" hold 8 0.05 2>"$tmp/short.err"
  expect "a short file: the program's status (0)" eq "$?" 0
  expect "said" grep -q "counters file '$tmp/short' is shorter than 10280 bytes" "$tmp/short.err"
  if small shm4 256; then
    mkhead "$tmp/shm4/sparse" 798720
    dd if=/dev/zero of="$tmp/shm4/fill" bs=4k 2>/dev/null
    VRAMLEDGER_COUNTERS="$tmp/shm4/sparse" LD_PRELOAD="$pre" "$prog" hold 8 0.05 2>"$tmp/shm4.err"
    expect "on a full tmpfs: the program's status (0)" eq "$?" 0
    unmount_small shm4
  fi
  end
fi

if want long-preload; then
  # the job's own LD_PRELOAD of 12 KiB (one library named over and over)
  # reaches it whole, behind the interposer's
  begin long-preload
  long=$full_so
  while [ ${#long} -lt 12288 ]; do long="$long:$full_so"; done
  LD_PRELOAD="$long" "$vl" run --out "$tmp/longpre" --quiet -- \
    sh -c 'printf %s "$LD_PRELOAD" >"$0"' "$tmp/longpre.got"
  expect "the job's status (0)" eq "$?" 0
  expect "its LD_PRELOAD whole, after the interposer" eq "$(cat "$tmp/longpre.got")" "$pre:$long"
  end
fi

if want symlinks; then
  # a symbolic link at every path vramledger writes (run, sweep, trace,
  # commit, watch's --csv and --textfile): refused, its target untouched
  begin symlinks
  echo secret >"$tmp/victim"
  mkdir -p "$tmp/victimdir" && chmod 755 "$tmp/victimdir"
  untouched() { [ "$(cat "$tmp/victim")" = secret ] && [ "$(stat -c %a "$tmp/victimdir")" = 755 ] &&
    [ -z "$(ls -A "$tmp/victimdir")" ]; }
  for f in record.jsonl counters; do
    mkdir -p "$tmp/sym-$f" && ln -s "$tmp/victim" "$tmp/sym-$f/$f"
    "$vl" run --out "$tmp/sym-$f" --quiet -- true 2>"$tmp/err"
    expect "run: $f refused" eq "$?" 1
    expect "named" grep -q "cannot create '.*/sym-$f/$f': it already exists" "$tmp/err"
  done
  ln -s "$tmp/victimdir" "$tmp/sym-out"
  "$vl" run --out "$tmp/sym-out" --quiet -- true 2>"$tmp/err"
  expect "run: --out a link to a directory refused" eq "$?" 1
  expect "said" grep -q "is a symbolic link" "$tmp/err"
  mkdir -p "$tmp/sym-fb" && ln -s "$tmp/victim" "$tmp/sym-fb/fallback"
  : >"$tmp/procs"
  FAKE_NVML_PROCS="$tmp/procs" "$vl" run --out "$tmp/sym-fb" --interval-ms 10 --quiet \
    --commitment "$data/commitments/guard-256mib.json" -- "$prog" hold 64 0.3 "$tmp/procs" 2>"$tmp/err"
  expect "run: the fallback file refused, the job's status (0)" eq "$?" 0
  expect "the trigger still in the record" grep -q '"type":"trigger"' "$tmp/sym-fb/record.jsonl"
  mkdir -p "$tmp/sym-sw" && ln -s "$tmp/victim" "$tmp/sym-sw/sweep.csv"
  "$vl" sweep --grid b=1 --out "$tmp/sym-sw" -- echo {b} >/dev/null 2>"$tmp/err"
  expect "sweep: sweep.csv refused" eq "$?" 1
  mkdir -p "$tmp/sym-pt/point-000-r0" && ln -s "$tmp/victim" "$tmp/sym-pt/point-000-r0/stderr.log"
  "$vl" sweep --grid b=1 --out "$tmp/sym-pt" -- echo {b} >/dev/null 2>"$tmp/err"
  expect "sweep: a point's stderr.log refused" grep -q "stderr.log': it is a symbolic link" "$tmp/err"
  mkdir -p "$tmp/sym-tr" && ln -s "$tmp/victim" "$tmp/sym-tr/alloc.trace"
  "$vl" trace --out "$tmp/sym-tr" -- true >/dev/null 2>"$tmp/err"
  expect "trace: alloc.trace refused" eq "$?" 1
  mkdir -p "$tmp/sym-cm" && ln -s "$tmp/victim" "$tmp/sym-cm/COMMITMENT.md"
  "$vl" commit --model gpt2 --seq 1024 --gpu h100-80gb --gpu-hours 1 --out "$tmp/sym-cm" --force \
    >/dev/null 2>"$tmp/err"
  expect "commit --force: COMMITMENT.md refused" eq "$?" 1
  expect "said as a link" grep -q "COMMITMENT.md': it is a symbolic link" "$tmp/err"
  ln -s "$tmp/victim" "$tmp/sym-watch.csv"
  "$vl" watch --count 1 --interval-ms 10 --csv "$tmp/sym-watch.csv" >/dev/null 2>"$tmp/err"
  expect "watch: --csv refused" eq "$?" 1
  mkdir -p "$tmp/sym-tf" && ln -s "$tmp/victim" "$tmp/sym-tf/vramledger.prom"
  "$vl" watch --count 1 --interval-ms 10 --textfile "$tmp/sym-tf" >/dev/null 2>"$tmp/err"
  expect "watch: --textfile replaces the link, never writes through it" \
    sh -c "[ ! -L '$tmp/sym-tf/vramledger.prom' ] && grep -q vramledger_ '$tmp/sym-tf/vramledger.prom'"
  expect "every target untouched" untouched
  end
fi

if want existing; then
  begin existing
  mkdir -p "$tmp/empty" && chmod 755 "$tmp/empty"
  "$vl" run --out "$tmp/empty" --quiet -- sh -c 'exit 2'
  expect "an empty directory is used, the job's status (2)" eq "$?" 2
  expect "its mode left alone (755)" eq "$(stat -c %a "$tmp/empty")" 755
  cp "$tmp/empty/record.jsonl" "$tmp/keep"
  "$vl" run --out "$tmp/empty" --quiet -- true 2>"$tmp/err"
  expect "a directory with a record refused" eq "$?" 1
  expect "its record byte for byte" cmp -s "$tmp/keep" "$tmp/empty/record.jsonl"
  : >"$tmp/afile" && chmod 644 "$tmp/afile"
  "$vl" run --out "$tmp/afile" --quiet -- true 2>"$tmp/err"
  expect "--out a file refused" sh -c "[ $? = 1 ] && grep -q 'not a directory' '$tmp/err'"
  expect "its mode left alone" eq "$(stat -c %a "$tmp/afile")" 644
  mkdir -p "$tmp/def/runs"
  now=$(date -u +%s)
  for i in 0 1 2 3; do mkdir "$tmp/def/runs/$(date -u -d "@$((now + i))" +%Y%m%dT%H%M%SZ)-true"; done
  (cd "$tmp/def" && "$vl" run --quiet -- true && "$vl" run --quiet -- true)
  expect "default run directories: never one that exists" eq "$(ls "$tmp"/def/runs/*/record.jsonl | wc -l)" 2
  end
fi

if want job-moves; then
  # a job that changes directory, closes every descriptor it inherited
  # (and is given the record's number for a file of its own), forks 350
  # processes, 300 of them allocating (256 counter slots)
  begin job-moves
  (cd "$tmp" && "$vl" run --out rel --quiet -- sh -c "cd / && '$prog' hold 1 0.1 && exit 12")
  expect "cd: the job's status (12)" eq "$?" 12
  expect "cd: its interposer still writes the record" sh -c "cat '$tmp/rel/record.d/'*.jsonl | grep -q '\"name\":\"holding\"'"
  "$vl" run --out "$tmp/cfd" --quiet -- "$prog" closefds "$tmp/cfd-file"
  expect "closed fds: its own file stays its own" eq "$?" 0
  expect "closed fds: the mark reaches the record" sh -c "cat '$tmp/cfd/record.d/'*.jsonl | grep -q '\"name\":\"after-close\"'"
  VRAMLEDGER_NVML_LIB=/nonexistent "$vl" run --out "$tmp/slots" --quiet -- "$table" slots-child 300 50 \
    >"$tmp/slots.out" 2>"$tmp/slots.err"
  expect "350 processes: the job's status (0)" eq "$?" 0
  expect "256 slots taken, 256 MiB in them" grep -q "^256 slots taken, 256 MiB in them" "$tmp/slots.out"
  expect "said once on the job's stderr" eq "$(grep -c 'every counter slot is taken' "$tmp/slots.err")" 1
  expect "the record's lost event: 44 processes" grep -q '"type":"lost".*"no_slot_procs":44' "$tmp/slots/record.jsonl"
  expect "report's finding no-slot" sh -c "'$vl' report '$tmp/slots' | grep -q '\[no-slot\] 44 processes of the job allocated'"
  end
fi

if want kills; then
  begin kills
  "$vl" run --out "$tmp/term" --quiet -- sh -c 'kill -TERM $$'
  expect "death by signal: 128 + signal" eq "$?" 143
  "$vl" run --out "$tmp/fwd" --quiet -- sleep 30 &
  vlpid=$!
  sampled "$tmp/fwd/record.jsonl"
  kill -TERM $vlpid
  wait $vlpid
  expect "TERM to vramledger alone reaches the job" eq "$?" 143
  "$vl" run --out "$tmp/kill9job" --quiet -- sh -c 'kill -9 $$'
  expect "kill -9 of the job: 137" eq "$?" 137
  expect "and its record complete" eq "$(rec "$tmp/kill9job/record.jsonl" exit-status)" 137
  # (the job holds 30 s: still running when run is killed, however late
  # its fifth sample; then ended, and its end waited for)
  : >"$tmp/procs"
  FAKE_NVML_PROCS="$tmp/procs" "$vl" run --out "$tmp/kill9vl" --interval-ms 10 --quiet -- "$prog" hold 16 30 "$tmp/procs" &
  vlpid=$!
  sampled "$tmp/kill9vl/record.jsonl" 5
  kill -9 $vlpid
  wait $vlpid 2>/dev/null
  job=$(awk 'NR == 1 { print $1 }' "$tmp/procs")
  [ -n "$job" ] && kill "$job" 2>/dev/null && gone "$job"
  expect "kill -9 of vramledger: a readable record, no exit" \
    sh -c "'$vl' report '$tmp/kill9vl' --format json | grep -q '\"exit_status\": null'"
  expect "with its samples" [ "$(rec "$tmp/kill9vl/record.jsonl" samples)" -ge 5 ]
  end
fi

if want left-signals; then
  # Ctrl-C while run waits for what the job left: passed on to it (it
  # ends, and so does the wait); a second one ends the wait, leaving a
  # process that ignores INT running. dfl: vramledger with SIGINT as a
  # terminal's job has it (a background job of sh has it ignored, and so
  # would its children); exec: $! is vramledger
  begin left-signals
  dfl() { exec python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' "$@"; }
  said() { # said FILE: wait (60 s at most) for run's word that it waits
    for _ in $(seq 1200); do grep -q 'waiting for' "$1" && return 0; sleep 0.05; done
    return 1
  }
  dfl "$vl" run --out "$tmp/lint" --quiet -- "$prog" leave 6 8 30 2>"$tmp/lint.err" &
  vlpid=$!
  expect "the wait is said" said "$tmp/lint.err"
  start=$(date +%s%N)
  kill -INT $vlpid
  wait $vlpid
  rc=$? took=$((($(date +%s%N) - start) / 1000000))
  # "at once": well before the 30 s the descendant sleeps, on a busy machine too
  expect "Ctrl-C ends the wait at once (${took} ms), the job's status (6)" eq "$rc.$((took < 15000))" 6.1
  expect "what it left ended from it" grep -q '"type":"exit",.*"descendants_left":0,' "$tmp/lint/record.jsonl"
  dfl "$vl" run --out "$tmp/lint2" --quiet -- sh -c "trap '' INT; sleep 30 & exit 7" 2>"$tmp/lint2.err" &
  vlpid=$!
  expect "the wait is said again" said "$tmp/lint2.err"
  kill -INT $vlpid
  taken $vlpid 2
  sleep 0.3 # time to end, were the first one to end it
  expect "a first Ctrl-C it ignores: still waiting" kill -0 $vlpid
  kill -INT $vlpid
  wait $vlpid
  expect "a second Ctrl-C ends the wait, the job's status (7)" eq "$?" 7
  left=$(sed -n 's/.*"type":"descendants".*"pids":\[\([0-9]*\)\].*/\1/p' "$tmp/lint2/record.jsonl")
  expect "leaving it running" kill -0 "$left"
  expect "said on stderr" grep -q "stopped waiting: 1 process the job left still runs (PID $left)" "$tmp/lint2.err"
  expect "and in the exit event" grep -q '"type":"exit",.*"descendants_left":1,' "$tmp/lint2/record.jsonl"
  [ -n "$left" ] && kill "$left" 2>/dev/null
  "$vl" run --out "$tmp/lterm" --quiet -- sh -c 'sleep 30 & exit 4' 2>"$tmp/lterm.err" &
  vlpid=$!
  expect "a shell's background process: the wait is said" said "$tmp/lterm.err"
  start=$(date +%s%N)
  kill -TERM $vlpid
  wait $vlpid
  rc=$? took=$((($(date +%s%N) - start) / 1000000))
  expect "TERM to vramledger ends it and the wait at once (${took} ms), the job's status (4)" \
    eq "$rc.$((took < 15000)).$(grep -c '"descendants_left":0,' "$tmp/lterm/record.jsonl")" 4.1.1
  end
fi

if want ctrl-c-loop; then
  # Ctrl-C (INT to the process group, as a terminal sends it) stops a
  # shell script around run: run closes its record, then dies of the
  # signal, so bash's wait ends the script (a shell that exits on INT
  # itself, as dash does, would pass whatever run did). A job's SEGV is
  # 139, never a core of run's
  begin ctrl-c-loop
  if command -v bash >/dev/null; then
    python3 - "$vl" "$tmp" >"$tmp/loop.out" 2>"$tmp/loop.err" <<'PY'
import os, signal, subprocess, sys, time
vl, tmp = sys.argv[1:]
script = "for i in 1 2; do '%s' run --quiet --out '%s/loop'$i -- sleep 30; echo after $?; done" % (vl, tmp)
signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's job has it (a background one has it ignored)
p = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, start_new_session=True)
def sampled(path):  # run started the job and handles its signals: a sample line
    try:
        return '"type":"sample"' in open(path).read()
    except OSError:
        return False
for _ in range(6000):  # 60 s at most
    if sampled(tmp + "/loop1/record.jsonl"):
        break
    time.sleep(0.01)
time.sleep(0.2)
os.killpg(p.pid, signal.SIGINT)
try:
    out, _ = p.communicate(timeout=60)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    out, _ = p.communicate()
print(p.returncode, out.decode().replace("\n", " ").strip() or "-")
PY
    expect "bash stops at Ctrl-C, 'after' never printed" eq "$(cat "$tmp/loop.out")" "-2 -"
    expect "the record closed first, the job's status (130)" eq "$(rec "$tmp/loop1/record.jsonl" exit-status)" 130
    expect "no second run" [ ! -e "$tmp/loop2" ]
  else
    echo "  ctrl-c-loop: bash left out (not installed)" >&2
  fi
  # ended SIGNUM|- RECORD VRAMLEDGER...: how run ended, as its parent sees
  # it, "exit N" or "signal N"; SIGNUM sent once RECORD has a sample line
  ended() { python3 -c '
import os, subprocess, sys, time
p = subprocess.Popen(sys.argv[3:])
if sys.argv[1] != "-":
    for _ in range(6000):  # 60 s at most
        try:
            if "\"type\":\"sample\"" in open(sys.argv[2]).read():
                break
        except OSError:
            pass
        time.sleep(0.01)
    os.kill(p.pid, int(sys.argv[1]))
r = p.wait()
print("exit %d" % r if r >= 0 else "signal %d" % -r)' "$@"; }
  expect "a job's SEGV: run exits 139, never dies of it (no core)" \
    eq "$(ended - - "$vl" run --out "$tmp/segv" --quiet -- sh -c 'kill -SEGV $$')" "exit 139"
  expect "a job's KILL: 137" eq "$(ended - - "$vl" run --out "$tmp/kill" --quiet -- sh -c 'kill -KILL $$')" "exit 137"
  expect "a job's QUIT: 131" eq "$(ended - - "$vl" run --out "$tmp/quit" --quiet -- sh -c 'kill -QUIT $$')" "exit 131"
  expect "TERM to run alone: passed on, then run dies of it" \
    eq "$(ended 15 "$tmp/termself/record.jsonl" "$vl" run --out "$tmp/termself" --quiet -- sleep 30)" "signal 15"
  expect "and its record closed, the job's status (143)" eq "$(rec "$tmp/termself/record.jsonl" exit-status)" 143
  # INT ignored when run starts (a background job's): the job ignores it
  # too, and run, passing it on, does not die of it (sent once the record
  # has a sample line, 60 s at most: the job is running)
  expect "INT ignored from the start ends nothing: the job's status (0)" eq "$(python3 -c '
import os, signal, subprocess, sys, time
p = subprocess.Popen(sys.argv[2:], preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
for _ in range(6000):
    try:
        if "\"type\":\"sample\"" in open(sys.argv[1]).read():
            break
    except OSError:
        pass
    time.sleep(0.01)
os.kill(p.pid, signal.SIGINT)
print(p.wait())' "$tmp/ignint/record.jsonl" "$vl" run --out "$tmp/ignint" --quiet -- sleep 1)" 0
  end
fi

if want group-signals; then
  # a signal reaches the job once, whoever sent it to whom (signals.py)
  begin group-signals
  python3 "$here/signals.py" "$vl" >"$tmp/signals.out" 2>&1
  expect "$(grep -c '^ok' "$tmp/signals.out") ways of signalling, each delivered once" eq "$?" 0
  [ -z "$bad" ] || sed 's/^/  /' "$tmp/signals.out" >&2
  end
fi

if want big-record; then
  # 200 MiB of record (8 GPUs at 100 ms, 1 MiB lines of a later
  # writer's between): read streamed, every sample, the peak where it is,
  # the exit
  begin big-record
  mkdir "$tmp/big"
  python3 - "$tmp/big/record.jsonl" <<'PY'
import sys
G = 1 << 30
with open(sys.argv[1], "w") as f:
    f.write('{"type":"meta","schema":"vramledger.run/1","t_ns":0,"interval_ms":100,"nvml":"ok",'
            '"command":["python","train.py"]}\n')
    filler = '{"type":"x-later","text":"%s"}\n' % ("x" * (1 << 20))
    gpus = ",".join('{"i":%d,"used":%d,"tree":%d}' % (g, 20 * G, 20 * G) for g in range(8))
    n = 0
    while f.tell() < 200 << 20:
        peak = 8 * 20 * G + (G if n == 5000 else 0)
        f.write('{"type":"sample","t_ns":%d,"gpus":[%s],"tree_bytes":%d,"tree_procs":8,'
                '"other_bytes":0,"cuda_alloc_bytes":0}\n' % (n * 100000000, gpus, peak))
        if n % 80 == 0:
            f.write(filler)
        n += 1
    f.write('{"type":"exit","t_ns":%d,"status":0,"samples":%d}\n' % (n * 100000000, n))
PY
  r=$tmp/big/record.jsonl
  expect "the record is over 200 MiB" [ "$(wc -c <"$r")" -gt 209715200 ]
  "$vl" report --format json "$tmp/big" >"$tmp/big.json" 2>"$tmp/big.err"
  expect "report reads it" eq "$?" 0
  expect "every sample, its peak at 500 s, its exit" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
p = d['peak']
n = int(open(sys.argv[2]).read().rsplit('\"samples\":', 1)[1].split('}')[0])
sys.exit(not (p['process_bytes'] == 161 << 30 and abs(p['process_t_s'] - 500) < 1e-6 and
              d['samples'] == n and d['exit_status'] == 0 and not d['truncated']))
" "$tmp/big.json" "$r"
  rm -rf "$tmp/big"
  end
fi

if want http; then
  # watch's endpoint (libmicrohttpd's, src/http_server.c) against a slow, a
  # split, a silent and a large client, and many slow ones at once
  begin http
  echo "4242 1073741824 1" >"$tmp/procs"
  FAKE_NVML_GPUS=2 FAKE_NVML_PROCS="$tmp/procs" "$vl" watch --interval-ms 50 --prometheus-port 0 2>"$tmp/w.err" &
  wpid=$!
  port=$(watch_port "$tmp/w.err")
  "$http" -s "$port" /metrics >"$tmp/split"
  expect "a request in three TCP segments is served" grep -q "^vramledger_gpu_memory_used_bytes" "$tmp/split"
  "$http" -b 25 "$port" /metrics >"$tmp/slow" &
  slow=$!
  # silent from the start: closed unanswered once HTTP_TIMEOUT_S (2 s) passed
  sh -c 's=$(date +%s%N); "$1" -w 100 "$2" /metrics >"$3"; echo $((($(date +%s%N) - s) / 1000000)) >"$3.ms"' \
    sh "$http" "$port" "$tmp/silent" &
  silent=$!
  sleep 0.2
  start=$(date +%s%N)
  "$http" "$port" /metrics >"$tmp/beside"
  took_ms=$((($(date +%s%N) - start) / 1000000))
  # served while the silent client is still held open (its 2 s timeout not
  # yet passed): no other scrape waited for it, however busy the machine
  silent_open=0
  kill -0 "$silent" 2>/dev/null && silent_open=1
  expect "slow and silent clients hold up no other scrape ($took_ms ms)" \
    sh -c "grep -q '^HTTP/1.0 200' '$tmp/beside' && [ $silent_open = 1 ]"
  wait $slow
  expect "a byte every 25 ms, never silent for the timeout: served" grep -q "^HTTP/1.0 200" "$tmp/slow"
  wait $silent
  silent_ms=$(cat "$tmp/silent.ms")
  # (not before the timeout; the upper bound only tells the timeout from a
  # connection never closed, generous for a busy machine)
  expect "a silent connection: closed unanswered at the timeout ($silent_ms ms)" \
    sh -c "[ ! -s '$tmp/silent' ] && [ $silent_ms -ge 1500 ] && [ $silent_ms -lt 30000 ]"
  # more slow clients at once than the 16 the hand-written server kept
  # (it closed the oldest): every one served, and a scrape beside them
  # served while they still send (a byte every 100 ms, 43 of them: about
  # 4 s, never silent for the timeout)
  i=0 pids=""
  while [ $i -lt 24 ]; do
    "$http" -b 100 "$port" /metrics >"$tmp/many.$i" &
    pids="$pids $!"
    i=$((i + 1))
  done
  sleep 0.2
  "$http" "$port" /metrics >"$tmp/beside"
  sending=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && sending=$((sending + 1)); done
  wait $pids
  expect "24 slow clients at once: all served" \
    [ "$(cat "$tmp"/many.* | grep -c '^HTTP/1.0 200')" = 24 ]
  expect "24 slow clients hold up no other scrape (served while $sending still sent)" \
    sh -c "grep -q '^HTTP/1.0 200' '$tmp/beside' && [ $sending -gt 0 ]"
  # 70 clients on the scraper's own address sending a byte a second (never
  # silent for the timeout): each new connection past HTTP_CONNS -
  # HTTP_SPARE (56) shuts the oldest unfinished one, so 20 scrapes beside
  # them are all answered
  i=0 pids=""
  while [ $i -lt 70 ]; do
    "$http" -b 1000 "$port" /metrics >/dev/null 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
  done
  sleep 0.5
  i=0 served=0
  while [ $i -lt 20 ]; do
    "$http" "$port" /metrics >"$tmp/beside" && grep -q '^HTTP/1.0 200' "$tmp/beside" && served=$((served + 1))
    i=$((i + 1))
  done
  kill $pids 2>/dev/null
  wait $pids 2>/dev/null
  expect "70 clients at a byte a second on one address: 20 of 20 scrapes answered ($served)" eq "$served" 20
  # 64 silent connections from one address: the next one shuts the oldest
  # and is served at once
  i=0 pids=""
  while [ $i -lt 64 ]; do
    "$http" -w 2500 "$port" /metrics >/dev/null &
    pids="$pids $!"
    i=$((i + 1))
  done
  sleep 0.5
  "$http" "$port" /metrics >"$tmp/over"
  wait $pids
  expect "a 65th connection from one address: served" grep -q '^HTTP/1.0 200' "$tmp/over"
  # a head past the hand-written server's 8 KiB is read; past
  # HTTP_MEMORY_BYTES (32 KiB) it is refused, 431 (RFC 6585 section 5)
  "$http" -p 12000 "$port" /metrics >"$tmp/large"
  expect "a 12 KB request head is served" grep -q "^vramledger_up 1" "$tmp/large"
  "$http" -p 40000 "$port" /metrics >"$tmp/huge"
  expect "a 40 KB request head: 431" grep -q "^HTTP/1.[01] 431" "$tmp/huge"
  kill -TERM $wpid
  wait $wpid
  expect "TERM stops watch cleanly" eq "$?" 0
  end
fi

if want hostile; then
  # a hostile string (markup, a terminal's escape sequences, new lines, a
  # table's bars) in every field of a record that a renderer prints
  begin hostile
  python3 - "$data/records/hostile-strings.jsonl" "$tmp/hostile.jsonl" <<'PY'
import json, sys
old = '</script><script>alert(1)</script><base href=\\"http://evil/\\">&\\"\''
esc = json.dumps("\u001b]0;pwned\u0007\u001b[2J\u009b31m|x\r\n## injected\n| a | b |")[1:-1]
src = open(sys.argv[1]).read()
assert old in src
open(sys.argv[2], "w").write(src.replace(old, old + esc))
PY
  h=$tmp/hostile.jsonl
  "$vl" report "$h" --format html >"$tmp/page.html"
  expect "html: no script of the record's" sh -c "! grep -q '<script>alert' '$tmp/page.html'"
  expect "html: no end of a script block" sh -c "! grep -q 'alert(1)</script>' '$tmp/page.html'"
  expect "html: no base element" sh -c "! grep -q '<base href' '$tmp/page.html'"
  expect "html: the string there, escaped" grep -q 'alert(1)&lt;/script&gt;' "$tmp/page.html"
  expect "html: and in the chart data" grep -q 'alert(1)\\u003c\\/script\\u003e' "$tmp/page.html"
  for f in text md; do
    "$vl" report "$h" --format $f >"$tmp/h.$f"
    expect "$f: printed" [ -s "$tmp/h.$f" ]
    expect "$f: no control character" sh -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$tmp/h.$f'"
    expect "$f: no C1 control" sh -c "! grep -q \"$(printf '\302\233')\" '$tmp/h.$f'"
    expect "$f: no line of the record's" sh -c "! grep -q '^## injected' '$tmp/h.$f'"
  done
  "$vl" doctor "$h" >"$tmp/h.doctor"
  expect "doctor: no control character" sh -c "! LC_ALL=C grep -q '[[:cntrl:]]' '$tmp/h.doctor'"
  for f in json trace; do
    "$vl" report "$h" --format $f >"$tmp/h.$f"
    expect "$f: JSON, the string in it" python3 -c "
import json, sys
sys.exit('injected' not in json.dumps(json.load(open(sys.argv[1]))))" "$tmp/h.$f"
  done
  end
fi

if want sweep-interrupted; then
  # a sweep stopped in a point (its record has no exit): run again, the
  # complete points are kept, the interrupted one runs again
  begin sweep-interrupted
  "$vl" sweep --grid b=1,2,3 --out "$tmp/sw" -- sh -c 'echo {b} >/dev/null' >/dev/null 2>&1
  r1=$tmp/sw/point-001-r0/record.jsonl
  grep -v '"type":"exit"' "$r1" >"$tmp/sw-cut" && cat "$tmp/sw-cut" >"$r1"
  cp "$tmp/sw/point-000-r0/record.jsonl" "$tmp/p0"
  "$vl" sweep --grid b=1,2,3 --out "$tmp/sw" -- sh -c 'echo {b} >/dev/null' >/dev/null 2>"$tmp/sw.err"
  expect "the resumed sweep succeeds" eq "$?" 0
  expect "it runs the interrupted point alone" eq "$(grep -c 'vramledger: sweep point ' "$tmp/sw.err")" 2
  expect "said so" grep -q "point 2/3 was interrupted" "$tmp/sw.err"
  expect "the complete ones kept byte for byte" cmp -s "$tmp/p0" "$tmp/sw/point-000-r0/record.jsonl"
  expect "its new record complete" eq "$(rec "$r1" exit-status)" 0
  expect "the old one kept" cmp -s "$tmp/sw-cut" "$tmp/sw/point-001-r0/record.interrupted.jsonl"
  expect "every row ok" eq "$(grep -c ',ok$' "$tmp/sw/sweep.csv")" 3
  end
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
