#!/usr/bin/env python3
"""No link circles between the source files of the library and the tool.

Usage: cycles.py NM ALLOW OBJECT...

An edge A -> B is a global symbol defined in B's object and used by A's
(nm: U in A, T/D/B/R/... in B). A circle (a strongly connected component of
more than one file) means two files that can only be understood, changed
and tested together; each dependency should go one way (docs/architecture.md,
"Rules"). ALLOW names circles known today, one a line as their files
separated by spaces; anything else fails, naming the symbols of each edge.
Tarjan's algorithm, iterative; one nm run over all the objects."""
import os
import subprocess
import sys


def symbols(nm, objs):
    """{object: (defined, used)} from one nm run over all the objects."""
    out = subprocess.run([nm, *objs], capture_output=True, text=True, check=True).stdout
    table, cur = {}, None
    for line in out.splitlines():
        if line.endswith(":") and line[:-1] in objs:
            cur = table.setdefault(line[:-1], (set(), set()))
            continue
        p = line.split()
        if cur is None or not p:
            continue
        if len(p) == 3 and p[1] in "TDBRCVWGS":
            cur[0].add(p[2])
        elif len(p) == 2 and p[0] == "U":
            cur[1].add(p[1])
    return table


def name(obj):
    base = os.path.basename(obj)
    return base[:-2] if base.endswith(".o") else base  # foo.c.o -> foo.c


def components(nodes, edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: cycles.py NM ALLOW OBJECT...")
    nm, allow_file, objs = sys.argv[1], sys.argv[2], sys.argv[3:]
    allowed = set()
    with open(allow_file) as f:
        for line in f:
            line = line.split("#")[0].split()
            if line:
                allowed.add(frozenset(line))
    defs, uses, owner = {}, {}, {}
    table = symbols(nm, objs)
    for o in objs:
        n = name(o)
        defs[n], uses[n] = table.get(o, (set(), set()))
        for s in defs[n]:
            owner.setdefault(s, n)
    edges = {n: {} for n in defs}
    for n, used in uses.items():
        for s in used:
            m = owner.get(s)
            if m and m != n:
                edges[n].setdefault(m, []).append(s)
    found = components(sorted(defs), edges)
    bad = 0
    for comp in found:
        if frozenset(comp) in allowed:
            print("known circle (tests/tools/cycles.allow): %s" % " ".join(comp))
            continue
        bad += 1
        print("link circle between %s:" % ", ".join(comp))
        members = set(comp)
        for a in comp:
            for b in sorted(edges[a]):
                if b in members:
                    print("  %s uses %s's %s" % (a, b, ", ".join(sorted(edges[a][b]))))
    for gone in allowed - {frozenset(c) for c in found}:
        print("no longer a circle: %s (take it out of tests/tools/cycles.allow)" % " ".join(sorted(gone)))
    if bad:
        print("%d circle(s): move what both files use into a file below them, or pass a "
              "table or a function pointer down instead of calling back up" % bad)
        return 1
    print("%d objects, no link circle beyond the known ones" % len(defs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
