#!/bin/sh
# The golden cases' glob matcher (match.sh) must be able to fail: patterns
# and files that must match, and as many that must not; then run.sh itself
# on a case whose .out.glob is wrong, which must report it and exit 1.
# usage: match_test.sh BIN (the vramledger binary)
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0
# t WANT PATTERN FILE: WANT is match or differ; PATTERN and FILE are printf
# formats (\n between lines)
t() {
  n=$((n + 1))
  printf "$2" >"$tmp/p"
  printf "$3" >"$tmp/f"
  if "$here/match.sh" "$tmp/p" "$tmp/f" 2>"$tmp/why"; then got=match; else got=differ; fi
  if [ "$got" != "$1" ]; then
    echo "FAIL $n: pattern '$2' file '$3': $got, want $1"
    cat "$tmp/why"
    fail=$((fail + 1))
  fi
}
t match  'a\nb\n' 'a\nb\n'
t differ 'a\nb\n' 'a\nc\n'
t differ 'a\nb\n' 'a\nb\nc\n'
t differ 'a\nb\nc\n' 'a\nb\n'
t match  '' ''
t differ '' 'a\n'
t match  '...\n' ''
t match  '...\n' 'a\nb\n'
t match  'a\n...\n' 'a\nb\nc\n'
t differ 'a\n...\n' 'b\na\n'
t match  '...\nc\n' 'a\nb\nc\n'
t differ '...\nb\n' 'a\nb\nc\n'
t match  'a\n...\nc\n' 'a\nc\n'
t match  'a\n...\nc\n...\ne\n' 'a\nb\nc\nd\ne\n'
t differ 'a\n...\nd\n...\nc\n' 'a\nc\nd\n'
t match  '...\nb\nc\n...\n' 'a\nb\nb\nc\nd\n'
t differ '...\nb\nc\n...\n' 'a\nb\nx\nc\nd\n'
t match  'peak * GiB\n' 'peak 51.53 GiB\n'
t differ 'peak * GiB\n' 'peak 51.53 MiB\n'
t match  '*: error: *\n' 'vramledger: error: cannot read x\n'
t differ '*: error: *\n' 'vramledger: warning: x\n'
t match  'a*b*b\n' 'a-b-b\n'
t differ 'a*b*b\n' 'a-b\n'
t match  '*\n' '\n'
t match  '**\n' 'anything\n'
t match  '| \\*\\*peak\\*\\* | *\n' '| **peak** | 1 |\n'
t differ '| \\*\\*peak\\*\\* | *\n' '| peak | 1 |\n'
t match  'a\\\\b\n' 'a\\b\n'
t match  'x [1] (y)? $z.^\n' 'x [1] (y)? $z.^\n'
t differ 'x [1] (y)? $z.^\n' 'x 1 (y)? $z.^\n'
t differ 'a.c\n' 'abc\n'
echo "$n matcher checks, $fail failed"

# run.sh on a case of its own: the exact stdout is --version's, the glob
# wrong (and, as a second case, right), the other files exact
mkdir "$tmp/cases"
"$bin" --version >"$tmp/version.out" 2>"$tmp/version.err"
echo "$?" >"$tmp/version.rc"
for c in wrong right; do
  echo '--version' >"$tmp/cases/$c.args"
  cp "$tmp/version.err" "$tmp/cases/$c.err"
  cp "$tmp/version.rc" "$tmp/cases/$c.rc"
done
echo 'vramledger * not-this-text' >"$tmp/cases/wrong.out.glob"
echo 'vramledger *' >"$tmp/cases/right.out.glob"
sh "$here/run.sh" "$bin" "$tmp/cases" >"$tmp/run.log" 2>&1
rc=$?
if [ $rc = 0 ] || ! grep -q '^FAIL wrong: stdout differs' "$tmp/run.log" ||
   ! grep -q '^ok   right$' "$tmp/run.log"; then
  echo "FAIL run.sh with a wrong .out.glob: exit $rc, want 1 with 'FAIL wrong' and 'ok   right'"
  cat "$tmp/run.log"
  fail=$((fail + 1))
fi
[ $fail = 0 ]
