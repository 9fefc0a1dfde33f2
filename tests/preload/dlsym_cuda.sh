#!/bin/sh
# A job's own wrapper of cudaMalloc (wrap_cudamalloc.c) preloaded behind
# the interposer (preload/preload.c, dlsym): its dlsym(RTLD_NEXT,
# "cudaMalloc") gets the runtime's, as without the interposer, never the
# interposer's own (each call would pass the interposer twice, and once
# the interposer had taken the runtime's for its own next, later calls
# would skip the wrapper). Each of the program's three calls passes the
# wrapper once and is counted once (3 MiB live), the wrapper looking its
# next up at its first call (lazy) or in its constructor (eager);
# directly, and under `vramledger run`. A wrapper before the interposer
# gets the interposer's, which calls the runtime: each call once as well.
# Usage: dlsym_cuda.sh VRAMLEDGER PRELOAD WRAP_LAZY WRAP_EAGER PROGRAM STUB_DIR FAKE_NVML
set -u
vl=$1 pre=$2 lazy=$3 eager=$4 prog=$5 stub=$6 fake=$7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$stub"
fail=0
check() { # check NAME LIVE [NEXT]: the program's status, its count, what the wrapper saw
  st=$?
  out=$(cat "$tmp/out") err=$(grep -v '^vramledger' "$tmp/err" | tr '\n' ' ')
  want="next ${3:-libcudart.so} W W W "
  if [ "$st" = 0 ] && [ "$out" = "live $2" ] && [ "$err" = "$want" ]; then
    echo "PASS $1"
  else
    echo "FAIL $1: status $st (0), stdout '$out' ('live $2'), wrapper '$err' ('$want')"
    sed 's/^/  /' "$tmp/err" | head -5
    fail=1
  fi
}
for w in lazy eager; do
  eval wrap=\$$w
  LD_PRELOAD="$wrap" "$prog" >"$tmp/out" 2>"$tmp/err"
  check "$w, without the interposer" 0
  LD_PRELOAD="$pre:$wrap" "$prog" >"$tmp/out" 2>"$tmp/err"
  check "$w, the interposer first" 3145728
  LD_PRELOAD="$wrap:$pre" "$prog" >"$tmp/out" 2>"$tmp/err"
  check "$w, the wrapper first" 3145728 "$(basename "$pre")"
  # (a sanitizer build of vramledger: the wrappers come before its ASan runtime)
  VRAMLEDGER_NVML_LIB="$fake" VRAMLEDGER_PRELOAD="$pre" LD_PRELOAD="$wrap" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$vl" run --out "$tmp/run-$w" --quiet -- "$prog" >"$tmp/out" 2>"$tmp/err"
  check "$w, under vramledger run" 3145728
done
exit $fail
