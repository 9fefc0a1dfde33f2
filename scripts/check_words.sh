#!/bin/sh
# Fail on words a user should not read (scripts/badwords.txt, after curl's
# scripts/badwords): each file:line that has one is printed, and the exit
# status is 1.
#
# What is checked, and the heuristics:
# - README.md and docs/**/*.md: every line (docs/cmd/*.md are --help too).
# - bench/README.md, bench/results/**/*.md and tests/**/*.md: every line;
#   of the .txt files beside them, the lines that start with '#' (their
#   headers say what each holds); the data (.json, .jsonl, traces) is not
#   read.
# - src/ and lib/ *.c and *.h: only what lies inside string literals, found
#   by a small lexer that skips /* */ and // comments and character
#   constants. A literal continued on the next line ("a " "b") is checked
#   piece by piece, so a word split across two literals is not seen.
# - A path into bench/results/ is a name, not prose: a token matching
#   bench/results/[^ ]* is removed before the words are matched, and so is a
#   results folder cited by its name alone, which starts with its date
#   (`generate-reserve/...`, as README's Evidence list cites them).
#   The folders keep their names.
# - scripts/badwords-known.txt lists hits let pass until their owners
#   reword them; a new hit fails.
# Patterns are matched with grep -E -i, one file at a time, on a copy of the
# file with one line per line, so grep's line numbers are the file's.
set -eu
cd "$(dirname "$0")/.."
words=scripts/badwords.txt
pats=$(mktemp)
hits=$(mktemp)
trap 'rm -f "$pats" "$hits"' EXIT
grep -v -e '^#' -e '^[[:space:]]*$' "$words" >"$pats"

# the text of each line that is checked (mawk has no {n} intervals: the
# date is spelled out)
prose='
{
  gsub(/bench\/results\/[^ ]*/, "")
  gsub(/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]-[^ ]*/, "")
  print
}'
headers='
{
  if ($0 !~ /^#/) { print ""; next }
  gsub(/bench\/results\/[^ ]*/, "")
  gsub(/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]-[^ ]*/, "")
  print
}'
literals='
{
  s = $0; n = length(s); out = ""; i = 1
  while (i <= n) {
    c = substr(s, i, 1); two = substr(s, i, 2)
    if (incomment) {
      if (two == "*/") { incomment = 0; i += 2 } else i++
    } else if (instring) {
      if (c == "\\") { out = out two; i += 2 }
      else if (c == "\"") { instring = 0; out = out " "; i++ }
      else { out = out c; i++ }
    } else if (two == "/*") { incomment = 1; i += 2 }
    else if (two == "//") break
    else if (c == "\"") { instring = 1; i++ }
    else if (c == "'\''") {
      for (i++; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "\\") i++
        else if (c == "'\''") { i++; break }
      }
    } else i++
  }
  instring = 0
  gsub(/bench\/results\/[^ ]*/, "", out)
  gsub(/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]-[^ ]*/, "", out)
  print out
}'

check() { # file, awk program: its hits as file:line:text
  awk "$2" "$1" | grep -n -E -i -f "$pats" | sed "s|^|$1:|" || true
}
for f in README.md $(find docs -name '*.md' | LC_ALL=C sort) \
  bench/README.md $(find bench/results tests -name '*.md' | LC_ALL=C sort); do
  check "$f" "$prose"
done >"$hits"
for f in $(find bench/results -name '*.txt' | LC_ALL=C sort); do
  check "$f" "$headers"
done >>"$hits"
for f in $(find src lib -name '*.[ch]' | LC_ALL=C sort); do
  check "$f" "$literals"
done >>"$hits"

# less the known hits (scripts/badwords-known.txt: path:text, the text a
# part of the checked text of the line); a known hit no longer found is
# named, so that its line can go
awk -v known=scripts/badwords-known.txt '
  BEGIN {
    while ((getline k <known) > 0) {
      if (k ~ /^#/ || k !~ /:/) continue
      i = index(k, ":"); nk++; kfile[nk] = substr(k, 1, i - 1); ktext[nk] = substr(k, i + 1)
    }
  }
  {
    i = index($0, ":"); file = substr($0, 1, i - 1); rest = substr($0, i + 1)
    text = substr(rest, index(rest, ":") + 1)
    known_hit = 0
    for (j = 1; j <= nk; j++)
      if (file == kfile[j] && index(text, ktext[j])) seen[j] = known_hit = 1
    if (!known_hit) { print; bad = 1 }
  }
  END {
    for (j = 1; j <= nk; j++)
      if (!seen[j]) print "check_words: known hit not found (remove it from " known "): " kfile[j] ":" ktext[j] >"/dev/stderr"
    if (bad) {
      print "check_words: words from scripts/badwords.txt above; each line'\''s replacement is in its header" >"/dev/stderr"
      exit 1
    }
  }' "$hits"
