#!/bin/sh
# match.sh PATTERN FILE: does FILE match the glob lines of PATTERN (a golden
# case's NAME.out.glob or NAME.err.glob, tests/cli/run.sh)? Exit 0 if so;
# else 1, and on stderr the first pattern line not found and where.
#
# PATTERN is read line by line, in order:
#   ...      a line that is exactly three dots: any number of lines (0 or more)
#   other    one line of FILE, whole; in it `*` matches any text (none too),
#            `\*` a star and `\\` a backslash; every other character is itself
# Lines of a pattern between two `...` must be consecutive lines of FILE; a
# pattern that does not start (end) with `...` is anchored at the first
# (last) line. An empty pattern matches an empty file only.
set -u
[ $# = 2 ] || { echo "usage: match.sh PATTERN FILE" >&2; exit 2; }
exec awk -v pat="$1" '
# one pattern line as pieces np, piece[1..np] of literal text: the line
# matches when it starts with piece[1], ends with piece[np] and holds the
# others in order between; star = 0 when the pattern has no `*` at all
function compile(p,    i, c, cur) {
  np = 0; cur = ""; star = 0
  for (i = 1; i <= length(p); i++) {
    c = substr(p, i, 1)
    if (c == "\\" && i < length(p) && (substr(p, i + 1, 1) == "*" || substr(p, i + 1, 1) == "\\")) {
      cur = cur substr(p, i + 1, 1); i++
    } else if (c == "*") {
      piece[++np] = cur; cur = ""; star = 1
    } else {
      cur = cur c
    }
  }
  piece[++np] = cur
}
function line_matches(k, s,    i, pos, at, rest) {
  compile(P[k])
  if (!star) return s == piece[1]
  if (substr(s, 1, length(piece[1])) != piece[1]) return 0
  pos = length(piece[1]) + 1
  for (i = 2; i < np; i++) {
    if (piece[i] == "") continue
    rest = substr(s, pos)
    at = index(rest, piece[i])
    if (at == 0) return 0
    pos += at - 1 + length(piece[i])
  }
  # the last piece: a suffix of what is left
  rest = substr(s, pos)
  return length(rest) >= length(piece[np]) &&
         substr(rest, length(rest) - length(piece[np]) + 1) == piece[np]
}
# does the block of pattern lines a..b match the file lines from j on?
function block_at(a, b, j,    k) {
  if (j + (b - a) > n) return 0
  for (k = a; k <= b; k++)
    if (!line_matches(k, L[j + k - a])) return 0
  return 1
}
function fail(k, j, why) {
  printf "match.sh: %s line %d \"%s\" %s (file line %d on)\n", pat, k, P[k], why, j > "/dev/stderr"
  exit 1
}
BEGIN {
  m = 0
  while ((getline line < pat) > 0) P[++m] = line
  close(pat)
}
{ L[++n] = $0 }
END {
  # blocks of consecutive non-... lines; j: the next file line to match
  j = 1; k = 1; free = 0
  while (k <= m) {
    if (P[k] == "...") { free = 1; k++; continue }
    a = k
    while (k <= m && P[k] != "...") k++
    b = k - 1
    if (k > m && free) {
      # the last block, after a `...`: the file ends with it
      s = n - (b - a)
      if (s < j || !block_at(a, b, s)) fail(a, j, "is not at the end")
      j = n + 1
    } else if (!free) {
      if (!block_at(a, b, j)) {
        for (t = a; t <= b && j + t - a <= n && line_matches(t, L[j + t - a]); t++) ;
        fail(t, j + t - a, "does not match")
      }
      j += b - a + 1
    } else {
      for (s = j; s <= n && !block_at(a, b, s); s++) ;
      if (s > n) fail(a, j, "is not found")
      j = s + b - a + 1
    }
    free = 0
  }
  if (!free && j <= n) {
    printf "match.sh: %s ends, file line %d \"%s\" is left over\n", pat, j, L[j] > "/dev/stderr"
    exit 1
  }
}
' "$2"
