#!/bin/sh
# The interposer's threads under ThreadSanitizer: preload/preload.c built
# into table_test (tests/preload/table_test.c) with -fsanitize=thread, on
# the stub CUDA libraries built the same way, and table_test's runtime
# (the table's shards, their resizes, the caller cache) and pools (lock-free
# pool readings) modes run. Any report fails the test. The interposer's
# dlsym is renamed here: ThreadSanitizer looks its own functions up with
# dlsym before it is ready, and an instrumented dlsym of ours would run
# first. The stub libraries' own lazy loading is not ours: suppressed.
# Usage: tests/preload/tsan.sh SOURCE_DIR [CC]
set -eu
src=$1 cc=${2:-cc}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
f="-fsanitize=thread -g -O1"
$cc $f -shared -fPIC -o "$d/libcuda.so.1" "$src/tests/preload/stub_cuda.c" -lpthread
$cc $f -shared -fPIC -o "$d/libcudart.so" "$src/tests/preload/stub_cudart.c" -ldl
$cc $f -fPIC -I"$src/include" -Ddlsym=vl_tsan_unwrapped_dlsym -c -o "$d/preload.o" \
  "$src/preload/preload.c"
$cc $f -rdynamic -I"$src/include" -o "$d/table_test" "$src/tests/preload/table_test.c" \
  "$d/preload.o" -L"$d" -lcudart -ldl -lpthread
printf 'race:libcudart.so\nrace:libcuda.so.1\n' >"$d/supp"
for run in "runtime 4 20000" "pools 4 1000"; do
  # shellcheck disable=SC2086 # run is the mode and its numbers
  LD_LIBRARY_PATH=$d TSAN_OPTIONS="suppressions=$d/supp halt_on_error=1 exitcode=66" \
    "$d/table_test" $run
done
