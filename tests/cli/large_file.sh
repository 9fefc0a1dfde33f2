#!/bin/sh
# A file read whole (not a run record) of more than 64 MiB is refused with
# its name, the limit and what to do, before it is read (sparse files), or
# as soon as a pipe passes the limit; one of exactly 64 MiB is read. A FIFO
# is refused, never waited on.
# usage: large_file.sh VRAMLEDGER
set -u
vl=$1
. "$(dirname "$0")/checks.sh" # check NAME CONDITION...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=$((64 * 1024 * 1024))

truncate -s $((limit + 1)) "$tmp/big.json"
"$vl" estimate --model "$tmp/big.json" >/dev/null 2>"$tmp/err"
check "a config over the limit fails" [ $? = 1 ]
check "the message names the file and the limit" \
  grep -q "^vramledger: error: cannot read '$tmp/big.json': larger than 64 MiB$" "$tmp/err"
check "the hint says the limit and the fix" \
  grep -q "^vramledger: hint: vramledger reads at most 64 MiB of a file other than a run record: check that '$tmp/big.json' is the file meant" "$tmp/err"

truncate -s $((limit + 1)) "$tmp/points.csv"
"$vl" fit --csv "$tmp/points.csv" >/dev/null 2>"$tmp/err"
check "a CSV of points over the limit fails" [ $? != 0 ]
check "its message names it" grep -q "cannot read '$tmp/points.csv': larger than 64 MiB" "$tmp/err"

head -c $((limit + 1)) /dev/zero | "$vl" fit --csv /dev/stdin >/dev/null 2>"$tmp/err"
check "a pipe over the limit fails" [ $? = 1 ]
check "its message names it" grep -q "cannot read '/dev/stdin': larger than 64 MiB" "$tmp/err"

truncate -s $limit "$tmp/edge.json"
"$vl" estimate --model "$tmp/edge.json" >/dev/null 2>"$tmp/err"
check "a file of exactly 64 MiB is read (and is no config)" \
  sh -c "! grep -q 'larger than' '$tmp/err' && grep -q 'edge.json' '$tmp/err'"
# a FIFO, a device: refused at once, naming the file, never waited on
# (the old reader blocked in open() until a writer came); the pipe that is
# stdin is still read (above). timeout's 60 s ends such a hang: a deadline,
# not a bound on speed (a refusal takes milliseconds, on a busy machine too)
mkfifo "$tmp/fifo"
for c in "check --commitment $tmp/fifo" "estimate --model $tmp/fifo" "fit --csv $tmp/fifo" \
  "report $tmp/fifo" "check --commitment $tmp/fifo --config $tmp/fifo"; do
  timeout 60 "$vl" $c </dev/null >/dev/null 2>"$tmp/err"
  check "$c: refused (exit 1), not waited on" [ $? = 1 ]
  check "named" grep -q "cannot read '$tmp/fifo': it is a FIFO, not a regular file" "$tmp/err"
done
echo "$n checks, $fail failed"
[ "$fail" = 0 ]
