#!/bin/sh
# dlsym(RTLD_NEXT) under the interposer (preload/preload.c, dlsym_after):
# two wrappers of write() a job preloads itself (wrap_write.c as A and B)
# behind the interposer must each get the next one, not each other's: a
# write goes through A, then B, then libc, once each, and the program
# exits 0. Directly, with the interposer first in LD_PRELOAD, and under
# `vramledger run`, which puts it there.
# Usage: dlsym_next.sh VRAMLEDGER PRELOAD WRAP_A WRAP_B WRITE_ONCE FAKE_NVML
set -u
vl=$1 pre=$2 a=$3 b=$4 prog=$5 fake=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check NAME: the program's status, its output, the wrappers' order
  st=$?
  out=$(cat "$tmp/out") err=$(grep -v '^vramledger' "$tmp/err" | tr '\n' ' ')
  if [ "$st" = 0 ] && [ "$out" = written ] && [ "$err" = "A B " ]; then
    echo "PASS $1"
  else
    echo "FAIL $1: status $st (0), stdout '$out' (written), wrappers '$err' ('A B ')"
    sed 's/^/  /' "$tmp/err" | head -5
    fail=1
  fi
}
LD_PRELOAD="$a:$b" "$prog" >"$tmp/out" 2>"$tmp/err"
check "without the interposer"
LD_PRELOAD="$pre:$a:$b" "$prog" >"$tmp/out" 2>"$tmp/err"
check "the interposer first"
LD_PRELOAD="$a:$pre:$b" "$prog" >"$tmp/out" 2>"$tmp/err"
check "the interposer between them"
# (a sanitizer build of vramledger: the wrappers come before its ASan runtime)
VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$pre" LD_PRELOAD="$a:$b" \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
  "$vl" run --out "$tmp/run" --quiet -- "$prog" >"$tmp/out" 2>"$tmp/err"
check "under vramledger run"
exit $fail
