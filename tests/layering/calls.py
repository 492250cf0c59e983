#!/usr/bin/env python3
"""calls.py DIR... -- no two source files call each other, directly or round
a longer loop.

Reads the symbol tables of the object files under each DIR (nm), draws an
edge from a file to every file that defines a function or variable it uses,
and prints each cycle of that graph (a strongly connected component of more
than one file).  Exits 1 when there is one.  The include check (check.sh)
keeps the layers pointing down; this keeps the files inside a folder in an
order a reader can follow: callers above callees."""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def cycles(graph):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        comp.append(top)
                        if top == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def main(dirs):
    objs = sorted(os.path.join(d, f) for top in dirs for d, _, fs in os.walk(top) for f in fs if f.endswith(".o"))
    owner, uses = {}, {}
    for obj in objs:
        defined, used = symbols(obj)
        uses[obj] = used
        for sym in defined:
            owner[sym] = obj
    graph = {obj: sorted({owner[s] for s in uses[obj] if s in owner and owner[s] != obj}) for obj in objs}
    loops = cycles(graph)
    for loop in loops:
        print("files that call each other: " + " <-> ".join(loop))
    if not loops:
        print(f"calls: {len(objs)} object files, no two call each other")
    return 1 if loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
