#!/bin/sh
# `vramledger CMD --help` prints docs/cmd/CMD.md exactly: one source.
set -u
bin=$1
docs=$2
fail=0
for page in "$docs"/*.md; do
  name=$(basename "$page" .md)
  if "$bin" "$name" --help | cmp -s - "$page"; then
    echo "ok   $name --help is $page"
  else
    echo "FAIL $name --help differs from $page"
    fail=1
  fi
done
exit $fail
