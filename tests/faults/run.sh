#!/bin/sh
# The fault-injection suite: vramledger and its job under a disk that
# fills up, file size and address space limits, symbolic links where it
# writes, a job that changes directory, closes its descriptors and forks
# hundreds of processes, signals to its process group, a 200 MiB record,
# slow and split HTTP requests, and hostile strings in what renderers
# print. Each case asserts the outcome: nothing followed, nothing lost
# beyond what the record itself says, the job's exit status intact. One
# line per case: PASS or FAIL, with the outcomes asserted (FAIL: those
# that were not met).
# Usage: run.sh VRAMLEDGER PRELOAD_TEST TABLE_TEST FAKE_NVML PRELOAD STUB_DIR
#               FULL_DISK HTTP_GET DATA_DIR [CASE...]
set -u
vl=$1 prog=$2 table=$3 fake=$4 pre=$5 stub=$6 full_so=$7 http=$8 data=$9
shift 9
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
tmp=$(cd "$tmp" && pwd -P) # the full disk matches real paths
export VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$pre" LD_LIBRARY_PATH="$stub"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" # the full disk before ASan's
exe=$(basename "$vl")
rec() { python3 "$here/record.py" "$@"; }

# begin NAME; expect OUTCOME CONDITION... (one asserted outcome); end:
# the case's line
passed=0 failed=0
begin() { name=$1 ok="" bad=""; }
expect() {
  what=$1
  shift
  if "$@"; then ok="$ok; $what"; else bad="$bad; $what"; fi
}
end() {
  if [ -z "$bad" ]; then
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
    "$vl" run --out "$tmp/cut" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8; exit 5"
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
    "$vl" run --out "$tmp/whole" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8; exit 6"
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
    "$vl" run --out "$tmp/long" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.8; exit 7"
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
    "$vl" run --out "$tmp/never" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.5; exit 8"
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
  # job too), room again once the job says so
  begin enospc-job
  full job FAULT_FULL_AT=1200 FAULT_FULL_ROOM="$tmp/job.room" \
    "$vl" run --out "$tmp/job" --interval-ms 10 --quiet -- \
    sh -c "'$prog' hold 8 0.5; : >'$tmp/job.room'; sleep 0.3; exit 9"
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
  # the disk full for vramledger alone, never room again: the job's lines
  # after vramledger's cut one close it first
  begin enospc-others
  full others FAULT_FULL_AT=4096 FAULT_FULL_PARTIAL=1 FAULT_FULL_EXE="$exe" \
    "$vl" run --out "$tmp/others" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.5; exit 10"
  r=$tmp/others/record.jsonl
  expect "the job's status (10)" eq "$st" 10
  expect "vramledger's line cut" eq "$(awk '$3 == "cut"' "$tmp/others.log" | wc -l)" 1
  expect "the job's marks after it" eq "$(rec "$r" marks step)" 5
  expect "the cut line stands alone" eq "$(rec "$r" cut)" 1
  expect "the record reads" sh -c "'$vl' report '$tmp/others' --format json >/dev/null"
  end
fi

if want enospc-job-cut; then
  # the job's interposer cut by the full disk, room again after: the
  # record goes on past its cut line, which the lost event counts
  begin enospc-job-cut
  full jobcut FAULT_FULL_AT=1500 FAULT_FULL_PARTIAL=1 FAULT_FULL_REFUSE=1 FAULT_FULL_EXE=preload_test \
    "$vl" run --out "$tmp/jobcut" --interval-ms 10 --quiet -- sh -c "'$prog' hold 8 0.5; exit 11"
  r=$tmp/jobcut/record.jsonl
  expect "the job's status (11)" eq "$st" 11
  expect "the job's line cut" eq "$(awk '$3 == "cut"' "$tmp/jobcut.log" | wc -l)" 1
  expect "the record says its bytes" eq "$(rec "$r" lost-record)" "$(logged job "cut refused gap" 6)"
  expect "vramledger's next line closes the cut one" [ "$(rec "$r" closings)" -ge 1 ]
  expect "the cut line stands alone" eq "$(rec "$r" cut)" 1
  expect "the record reads to its exit" sh -c "'$vl' report '$tmp/jobcut' --format json | grep -q '\"exit_status\": 11'"
  end
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
