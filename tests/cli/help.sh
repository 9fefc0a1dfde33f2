#!/bin/sh
# `vramledger CMD --help` is cut from docs/cmd/CMD.md (one source: the page
# is read at build time by cmake/md2man.c): "Usage:" and the page's
# Synopsis, its lead paragraph, "Options:" and its Options section ("###"
# groups as "  Group:"), each line the page's own less its backquotes,
# then the line naming the man page and the file. On stdout, nothing on
# stderr, exit 0. The text here is built from the page by awk, apart from
# the C that builds it.
set -u
bin=$1
docs=$2
fail=0
expected() { # PAGE NAME
  awk -v name="$2" '
    function out(a, n,   i, j, k) { # a[1..n] less leading and trailing blank lines
      for (i = 1; i <= n && a[i] == ""; i++);
      for (j = n; j >= i && a[j] == ""; j--);
      for (k = i; k <= j; k++) print a[k]
    }
    !title { if ($0 ~ /^# vramledger /) { title = 1; sec = "lead" } next }
    /^## / {
      t = tolower(substr($0, 4))
      sec = (t == "synopsis" && !syn++) ? "syn" : (t == "options" && !opt++) ? "opt" : "other"
      next
    }
    {
      gsub(/`/, "")
      if (sec == "lead") lead[++nl] = $0
      else if (sec == "syn") sy[++ns] = $0
      else if (sec == "opt") op[++no] = /^### / ? "  " substr($0, 5) ":" : $0
    }
    END {
      print "Usage:"; out(sy, ns); print ""
      out(lead, nl); print ""
      print "Options:"; out(op, no); print ""
      print "The full text: man vramledger-" name ", or docs/cmd/" name ".md"
    }' "$1"
}
for page in "$docs"/*.md; do
  name=$(basename "$page" .md)
  "$bin" "$name" --help >/tmp/vl_help.$$ 2>/tmp/vl_help_err.$$
  rc=$?
  expected "$page" "$name" >/tmp/vl_help_want.$$
  if [ $rc != 0 ] || [ -s /tmp/vl_help_err.$$ ]; then
    echo "FAIL $name --help: exit $rc, stderr: $(head -c 200 /tmp/vl_help_err.$$)"
    fail=1
  elif ! grep -q '^Options:$' /tmp/vl_help_want.$$ || ! grep -q '^    -' /tmp/vl_help_want.$$; then
    echo "FAIL $page: no '## Options' section with an option line"
    fail=1
  elif cmp -s /tmp/vl_help.$$ /tmp/vl_help_want.$$; then
    echo "ok   $name --help is $page's synopsis, lead and options"
  else
    echo "FAIL $name --help differs from $page's synopsis, lead and options:"
    diff /tmp/vl_help_want.$$ /tmp/vl_help.$$ | head -20
    fail=1
  fi
done
rm -f /tmp/vl_help.$$ /tmp/vl_help_err.$$ /tmp/vl_help_want.$$
exit $fail
