#!/bin/sh
# `vramledger CMD --help` prints docs/cmd/CMD.md exactly (one source: the
# page is embedded at build time), on stdout, nothing on stderr, exit 0.
set -u
bin=$1
docs=$2
fail=0
for page in "$docs"/*.md; do
  name=$(basename "$page" .md)
  "$bin" "$name" --help >/tmp/vl_help.$$ 2>/tmp/vl_help_err.$$
  rc=$?
  if [ $rc != 0 ] || [ -s /tmp/vl_help_err.$$ ]; then
    echo "FAIL $name --help: exit $rc, stderr: $(head -c 200 /tmp/vl_help_err.$$)"
    fail=1
  elif cmp -s /tmp/vl_help.$$ "$page"; then
    echo "ok   $name --help is $page"
  else
    echo "FAIL $name --help differs from $page"
    fail=1
  fi
done
rm -f /tmp/vl_help.$$ /tmp/vl_help_err.$$
exit $fail
