#!/usr/bin/env python3
"""Call cycles among the files of a folder: file A calls a function that
file B defines and B (directly or through others of the folder) calls one
that A defines. Such a cycle means the files are one module in all but name
(the aggregator issue: "no call cycle among the files of distributed/ or
kafka/").

    tests/tools/call_cycles.py DIR [DIR ...]      prints each cycle, exits 1 if any
    tests/tools/call_cycles.py --count DIR ...    prints "DIR: N files in cycles, M cycles"

A crude reader, not a compiler: functions are the names defined at column 0
with a body (`name(...)\n{`), calls are `name(` anywhere else outside
comments and strings. Good enough for a C tree in this style (one definition
a line, K&R braces on their own line)."""
import os
import re
import sys

DEF = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\n\{", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def strip(src):
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', src)


def graph(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".c"))
    text = {f: strip(open(os.path.join(folder, f), encoding="utf-8").read()) for f in files}
    owner = {}
    for f in files:
        for m in DEF.finditer(text[f]):
            # static functions belong to their file alone
            line = text[f][m.start():m.end()].split("\n")[0]
            if not line.startswith("static"):
                owner.setdefault(m.group(1), f)
    edges = {f: set() for f in files}
    for f in files:
        for m in CALL.finditer(text[f]):
            g = owner.get(m.group(1))
            if g and g != f:
                edges[f].add(g)
    return files, edges


def sccs(nodes, edges):
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main(argv):
    count = argv[:1] == ["--count"]
    dirs = argv[1:] if count else argv
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    found = 0
    for d in dirs:
        files, edges = graph(d)
        comps = sccs(files, edges)
        found += len(comps)
        if count:
            print(f"{d}: {sum(len(c) for c in comps)} files in cycles, {len(comps)} cycles, {len(files)} files")
            continue
        for c in comps:
            print(f"{d}: cycle of {len(c)} files: {' '.join(c)}")
            for f in c:
                inside = sorted(g for g in edges[f] if g in c)
                print(f"    {f} -> {' '.join(inside)}")
    return 1 if found and not count else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
