#!/bin/bash
# What a reader gets from each command, whatever its page says:
# - `vramledger CMD --help` is at most 80 lines of at most 80 columns (the
#   synopsis and the options; the rest is in the man page) and lists the
#   options: an "Options:" heading with option lines, every flag the
#   command's option table takes (src/cmd_CMD.c's struct cli_opt entries;
#   estimate's job flags, src/jobflags.c), every flag of its synopsis and
#   every flag that opens an option line anywhere in docs/cmd/CMD.md, under
#   "Options:", each in one or two lines;
# - bash completion (scripts/vramledger.bash) offers each of those flags;
# - man vramledger-CMD has man-pages(7)'s sections in its order: NAME,
#   SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS, EXAMPLES, then
#   ENVIRONMENT, FILES, SEE ALSO where present.
# Usage: help_man.sh VRAMLEDGER DOCS_CMD_DIR SRC_DIR MAN_DIR COMPLETION
set -u
bin=$1 docs=$2 src=$3 man=$4 completion=$5
max=80
fail=0
order="NAME SYNOPSIS DESCRIPTION OPTIONS EXIT_STATUS EXAMPLES ENVIRONMENT FILES SEE_ALSO"
must="NAME SYNOPSIS DESCRIPTION OPTIONS EXIT_STATUS EXAMPLES"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$completion"
bad() { echo "FAIL $*"; fail=1; ok=0; }
for page in "$docs"/*.md; do
  name=$(basename "$page" .md)
  ok=1
  "$bin" "$name" --help >"$tmp/help" 2>/dev/null
  lines=$(wc -l <"$tmp/help")
  [ "$lines" -le $max ] || bad "$name --help is $lines lines (at most $max)"
  wide=$(awk 'length > 80 { n++ } END { print n + 0 }' "$tmp/help")
  [ "$wide" = 0 ] || bad "$name --help has $wide lines over 80 columns"
  grep -q '^Options:$' "$tmp/help" && grep -q '^    -' "$tmp/help" || bad "$name --help lists no options"
  # each option in a line or two (three where its name takes a line of its
  # own)
  long=$(sed -n '/^Options:$/,$p' "$tmp/help" | awk '
    /^    [^ ]/ { if (n > 3) print tag; tag = $1; n = 0 }
    /^     / || /^    [^ ]/ { n++ }
    END { if (n > 3) print tag }' | sort -u | tr '\n' ' ')
  [ -z "$long" ] || bad "$name --help: options over two lines: $long"
  srcs=$src/cmd_$name.c
  [ "$name" = estimate ] && srcs="$srcs $src/jobflags.c"
  { sed -n 's/.*{"\([a-z][a-z0-9-]*\)", *\(true\|false\), *O_.*/--\1/p' $srcs
    grep -o '^    --[a-z][a-z0-9-]*' "$page" | sed 's/^ *//'
    awk '/^## /{f = $0 == "## Synopsis"; next} f' "$page" | grep -o -- '--[a-z][a-z0-9-]*'; } |
    sort -u >"$tmp/flags"
  sed -n '/^Options:$/,$p' "$tmp/help" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u >"$tmp/said"
  missing=$(comm -23 "$tmp/flags" "$tmp/said" | tr '\n' ' ')
  [ -z "$missing" ] || bad "$name --help does not list: $missing"
  COMP_WORDS=(vramledger "$name" --) COMP_CWORD=2 COMPREPLY=()
  PATH=$(dirname "$bin"):$PATH _vramledger
  printf '%s\n' "${COMPREPLY[@]}" | sort -u >"$tmp/completed"
  missing=$(comm -23 "$tmp/flags" "$tmp/completed" | tr '\n' ' ')
  [ -z "$missing" ] || bad "$name: bash completion does not offer: $missing"
  heads=$(MANWIDTH=80 man -l "$man/vramledger-$name.1" 2>/dev/null |
    sed -n 's/^\([A-Z][A-Z ]*[A-Z]\)$/\1/p' | tr ' ' _ | tr '\n' ' ')
  want=""
  for s in $order; do
    case " $heads " in *" $s "*) want="$want$s " ;; esac
  done
  [ "$heads" = "$want" ] || bad "man vramledger-$name: sections $heads(want the order $order)"
  for s in $must; do
    case " $heads " in *" $s "*) ;; *) bad "man vramledger-$name has no $s" ;; esac
  done
  [ $ok = 0 ] || echo "ok   $name: --help $lines lines, its options listed and completed, man sections in order"
done
exit $fail
