#!/usr/bin/env python3
"""The library's layers use one another only along the design's edges.

Usage: layers.py NM TABLE SOURCE_DIR OBJECT...

TABLE (tests/tools/layers.txt) says which layers each layer may use and
which layer each public header belongs to. Two checks:

- links: a global symbol used by an object of one layer and defined by an
  object of another (nm, as tests/tools/cycles.py reads it) is an edge that
  TABLE must allow. An object's layer is its target's: .../vl_<layer>.dir/.
  The build stops on the same edges first (CMakeLists.txt, vl_layer_*);
  this names every one of them at once.
- includes: each #include "..." of lib/<layer>/ and of include/vramledger/
  is an edge to the header's layer (a public header by TABLE, lib/<other>/
  by its folder, a file beside the includer by its own), which TABLE must
  allow; a layer's internal.h is its own (lib/util's aside, which every
  layer shares); and no public header includes itself again through others
  (an include circle).

Each refusal names the file, the header or symbol, and the two layers."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cycles import symbols  # noqa: E402

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_table(path):
    uses, owner = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#")[0].strip()
            if not line:
                continue
            head, _, rest = line.partition(":")
            layer, kind = head.split()
            if kind == "uses":
                uses[layer] = set(rest.split()) | {layer, "util"}
            elif kind == "headers":
                for h in rest.split():
                    owner["vramledger/" + h] = layer
            else:
                sys.exit("%s:%d: expected 'LAYER uses:' or 'LAYER headers:'" % (path, n))
    return uses, owner


def object_layer(obj):
    m = re.search(r"vl_([a-z]+)\.dir", obj)
    return m.group(1) if m else None


def link_edges(nm, objs, uses):
    table = symbols(nm, objs)
    owner = {}
    for o in objs:
        for s in table.get(o, (set(), set()))[0]:
            owner.setdefault(s, o)
    bad = []
    for o in objs:
        a = object_layer(o)
        for s in sorted(table.get(o, (set(), set()))[1]):
            d = owner.get(s)
            b = object_layer(d) if d else None
            if b and b not in uses[a]:
                bad.append("%s (%s) calls %s of %s (%s)" % (
                    os.path.basename(o)[:-2], a, s, os.path.basename(d)[:-2], b))
    return bad


def header_layer(inc, here_layer, owner):
    if inc.startswith("vramledger/"):
        return owner.get(inc, "?")
    m = re.match(r"\.\./([a-z]+)/", inc)
    return m.group(1) if m else here_layer


def include_edges(src, uses, owner):
    bad, graph = [], {}
    files = []
    for layer in sorted(uses):
        d = os.path.join(src, "lib", layer)
        files += [(os.path.join("lib", layer, f), layer) for f in sorted(os.listdir(d))
                  if f.endswith((".c", ".h"))]
    inc_dir = os.path.join(src, "include", "vramledger")
    for f in sorted(os.listdir(inc_dir)):
        h = "vramledger/" + f
        if h not in owner:
            bad.append("include/%s: not in tests/tools/layers.txt (give it its layer)" % h)
            continue
        files.append((os.path.join("include", h), owner[h]))
    for rel, layer in files:
        with open(os.path.join(src, rel)) as fh:
            incs = INCLUDE.findall(fh.read())
        if rel.startswith("include/"):
            graph[rel[len("include/"):]] = [i for i in incs if i.startswith("vramledger/")]
        for inc in incs:
            b = header_layer(inc, layer, owner)
            if b not in (layer, "util") and inc.endswith("/internal.h"):
                bad.append("%s includes %s, which is for lib/%s alone (include a header of "
                           "its meant for the others)" % (rel, inc, b))
            elif b == "?":
                bad.append("%s includes %s, which tests/tools/layers.txt does not name" % (rel, inc))
            elif b not in uses[layer]:
                bad.append("%s (%s) includes %s (%s)" % (rel, layer, inc, b))
    return bad, graph


def include_circles(graph):
    """Each circle of public headers including one another, once."""
    found, state = [], {}

    def visit(h, path):
        state[h] = 1
        for n in graph.get(h, []):
            if state.get(n) == 1:
                found.append(path[path.index(n):] + [n])
            elif n in graph and not state.get(n):
                visit(n, path + [n])
        state[h] = 2

    for h in sorted(graph):
        if not state.get(h):
            visit(h, [h])
    return found


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: layers.py NM TABLE SOURCE_DIR OBJECT...")
    nm, table, src, objs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    uses, owner = read_table(table)
    objs = [o for o in objs if object_layer(o) in uses]
    bad = ["link: " + b for b in link_edges(nm, objs, uses)]
    inc_bad, graph = include_edges(src, uses, owner)
    bad += ["include: " + b for b in inc_bad]
    bad += ["include circle: " + " -> ".join(c) for c in include_circles(graph)]
    for b in bad:
        print(b)
    if bad:
        print("%d against the layers (tests/tools/layers.txt): move the code to the layer "
              "that may use both sides, or pass plain data down" % len(bad))
        return 1
    print("%d objects and %d public headers, every edge along the layers" % (len(objs), len(graph)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
