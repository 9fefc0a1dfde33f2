#!/bin/sh
# Golden CLI tests: for every cases/NAME.args, run `vramledger ARGS` from the
# cases directory and compare stdout, stderr and the exit code with
# NAME.out, NAME.err and NAME.rc. A NAME.filter (a shell command reading
# stdout) pins what the case tests: its output is what NAME.out holds.
#
# A case about one thing (an error, a refusal, one flag's effect) pins only
# that: NAME.out.glob (NAME.err.glob) in place of NAME.out (NAME.err) holds
# pattern lines matched in order by match.sh: `*` is any text within a line,
# a line `...` any number of lines, `\*` a star, every other character itself.
# So `...` then `vramledger: error: *` pins an error's last line and nothing
# of an estimate above it (match_test.sh checks that a wrong output fails).
#
# VL_REGEN=1 rewrites NAME.out, NAME.err and NAME.rc (review the diff); a
# .glob is kept, being written by hand, and a case whose output it no longer
# matches is listed (STALE) for its pattern to be mended by hand.
set -u
bin=$1
dir=$2
fail=0
n=0
here=$(cd "$(dirname "$0")" && pwd)
cd "$dir" || exit 1
# estimate's dry run with a Python that has neither torch nor transformers
# here, whatever python3 has (tests/cli/run_tests.sh runs real dry runs)
export VRAMLEDGER_PYTHON=../python-without-torch
# Hub ids are looked up in a cache of the cases' own (hf-cache/models--ORG--NAME)
export HF_HUB_CACHE=hf-cache
for args in *.args; do
  name=${args%.args}
  n=$((n + 1))
  eval "set -- $(cat "$args")"
  "$bin" "$@" >"/tmp/vl_golden.$$.out" 2>"/tmp/vl_golden.$$.err"
  rc=$?
  if [ -f "$name.filter" ]; then
    sh -c "$(cat "$name.filter")" <"/tmp/vl_golden.$$.out" >"/tmp/vl_golden.$$.f" &&
      mv "/tmp/vl_golden.$$.f" "/tmp/vl_golden.$$.out"
  fi
  if [ "${VL_REGEN:-0}" = 1 ]; then
    for s in out err; do
      if [ -f "$name.$s.glob" ]; then
        "$here/match.sh" "$name.$s.glob" "/tmp/vl_golden.$$.$s" 2>/dev/null ||
          echo "STALE $name.$s.glob: mend it by hand"
      else
        cp "/tmp/vl_golden.$$.$s" "$name.$s"
      fi
    done
    echo "$rc" >"$name.rc"
    continue
  fi
  ok=1
  if [ "$rc" != "$(cat "$name.rc")" ]; then
    echo "FAIL $name: exit $rc, want $(cat "$name.rc")"
    ok=0
  fi
  for s in out err; do
    if [ -f "$name.$s.glob" ] && [ -f "$name.$s" ]; then
      echo "FAIL $name: both $name.$s and $name.$s.glob (keep one)"
      ok=0
    elif [ -f "$name.$s.glob" ]; then
      if ! "$here/match.sh" "$name.$s.glob" "/tmp/vl_golden.$$.$s"; then
        echo "--- $name std$s:"
        cat "/tmp/vl_golden.$$.$s"
        echo "FAIL $name: std$s differs"
        ok=0
      fi
    elif ! diff -u "$name.$s" "/tmp/vl_golden.$$.$s"; then
      echo "FAIL $name: std$s differs"
      ok=0
    fi
  done
  [ $ok = 1 ] && echo "ok   $name" || fail=$((fail + 1))
done
rm -f "/tmp/vl_golden.$$.out" "/tmp/vl_golden.$$.err"
echo "$n cases, $fail failed"
[ "$n" -gt 0 ] && [ $fail = 0 ]
