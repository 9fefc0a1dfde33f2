#!/usr/bin/env python3
"""No C function of the library or the tool over 150 lines.

Usage: funclen.py SOURCE_DIR ALLOW [--list]

Reads every .c and .h file under SOURCE_DIR/lib and SOURCE_DIR/src. A
function is a brace block at file level whose header (the text since the
last ';', '}' or preprocessor line) ends in a parameter list; its length
runs from the line of its name to the line of its closing brace, comments
and blank lines included. Comments, strings and character literals are
blanked first, so a brace inside them counts for nothing.

ALLOW (tests/tools/funclen.allow) names the functions over the limit today,
one a line as FILE FUNCTION LINES: such a function fails once it grows past
its LINES, a function not listed fails past 150, and a listed one that is
gone or back under the limit fails too, so the list only shrinks. --list
prints every function over the limit, longest first, and exits 0."""
import os
import re
import sys

LIMIT = 150
HEADER = re.compile(r"(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:__attribute__\s*\(\(.*\)\)\s*)*$", re.S)


def blank(text):
    """text with comments, strings and char literals (and preprocessor
    lines) turned into spaces, newlines kept"""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            while i < n and text[i] != "\n":  # a directive, with its continuations
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """[(name, first line, lines)] of the file's function definitions"""
    text = blank(open(path, encoding="utf-8").read())
    found, depth, since, start = [], 0, 0, None
    for i, c in enumerate(text):
        if c == "{":
            if depth == 0:
                head = text[since:i]
                m = HEADER.search(head.rstrip())
                if m and not re.match(r"\s*typedef\b", head) and "=" not in head:
                    start = (m.group(1), text.count("\n", 0, since + m.start(1)) + 1)
                else:
                    start = None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if start:
                    last = text.count("\n", 0, i) + 1
                    found.append((start[0], start[1], last - start[1] + 1))
                start, since = None, i + 1
        elif c == ";" and depth == 0:
            since = i + 1
    return found


def scan(root):
    rows = []
    for top in ("lib", "src"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    p = os.path.join(d, f)
                    rel = os.path.relpath(p, root)
                    rows += [(rel, name, line, n) for name, line, n in functions(p)]
    return rows


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    root, allow_path = argv[0], argv[1]
    over = sorted((r for r in scan(root) if r[3] > LIMIT), key=lambda r: -r[3])
    if "--list" in argv:
        for rel, name, line, n in over:
            print("%4d lines  %s:%d %s()" % (n, rel, line, name))
        return 0
    allow = {}
    for line in open(allow_path):
        p = line.split()
        if p and not p[0].startswith("#"):
            allow[(p[0], p[1])] = int(p[2])
    bad = []
    seen = set()
    for rel, name, line, n in over:
        key = (rel, name)
        seen.add(key)
        if key not in allow:
            bad.append("%s:%d: %s() is %d lines, over %d: split it (one function a computation)"
                       % (rel, line, name, n, LIMIT))
        elif n > allow[key]:
            bad.append("%s:%d: %s() grew to %d lines (%s allows %d, the limit is %d)"
                       % (rel, line, name, n, os.path.basename(allow_path), allow[key], LIMIT))
    for key, n in sorted(allow.items()):
        if key not in seen:
            bad.append("%s: %s() is no longer over %d lines: take its line out of %s"
                       % (key[0], key[1], LIMIT, os.path.basename(allow_path)))
    for b in bad:
        print(b)
    print("%d functions over %d lines (%d allowed)" % (len(over), LIMIT, len(allow)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
