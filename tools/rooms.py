#!/usr/bin/env python3
"""Rooms, arrows and circles of a Rust crate's src/ (issue 39).

A room is a top-level module (src/X.rs or src/X/). An arrow A -> B is a
reference from a file of room A to room B: `crate::B` (in a `use` or a
path), `use crate::{B, ...}`, or a crate-root re-export (`crate::Name`
where lib.rs says `pub use B::...Name`). Comment lines are skipped.
A circle is a strongly connected component with more than one room.

Usage: tools/rooms.py [src-dir] [--files]
"""
import os
import re
import sys
from collections import defaultdict

src = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "src"
by_file = "--files" in sys.argv
root_file = "lib.rs" if os.path.exists(os.path.join(src, "lib.rs")) else "main.rs"

rooms = set()
for entry in os.listdir(src):
    path = os.path.join(src, entry)
    if entry in (root_file,):
        continue
    if os.path.isdir(path):
        rooms.add(entry)
    elif entry.endswith(".rs"):
        rooms.add(entry[:-3])


def strip(text):
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            continue
        out.append(line.split("//")[0] if "://" not in line else line)
    return "\n".join(out)


# Root re-exports: name -> room.
root_text = strip(open(os.path.join(src, root_file)).read())
reexport = {}
for m in re.finditer(r"pub(?:\(crate\))?\s+use\s+(?:self::|crate::)?(\w+)((?:::\w+)*)(?:::\{([^}]*)\}|::(\w+))?\s*;", root_text, re.S):
    room = m.group(1)
    if room not in rooms:
        continue
    names = []
    if m.group(3):
        names = [n.strip().split(" as ")[-1].strip() for n in m.group(3).split(",")]
    elif m.group(4):
        names = [m.group(4)]
    else:
        tail = m.group(2).strip(":").split("::")
        if tail and tail[-1]:
            names = [tail[-1]]
    for n in names:
        if n and n not in ("self",):
            reexport[n] = room


def room_of(rel):
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


arrows = defaultdict(lambda: defaultdict(int))  # a -> b -> files
file_arrows = defaultdict(set)
nfiles = defaultdict(int)
for dirpath, _, files in os.walk(src):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(dirpath, f)
        rel = os.path.relpath(path, src)
        if rel == root_file:
            continue
        a = room_of(rel)
        if a not in rooms:
            continue
        nfiles[a] += 1
        text = strip(open(path).read())
        targets = set()
        for m in re.finditer(r"crate::(\w+)", text):
            name = m.group(1)
            if name in rooms:
                targets.add(name)
            elif name in reexport:
                targets.add(reexport[name])
        for m in re.finditer(r"use\s+crate::\{([^;]*)\}\s*;", text, re.S):
            body = m.group(1)
            depth = 0
            token = ""
            for ch in body + ",":
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                if depth == 0 and ch == ",":
                    head = token.strip().split("::")[0].strip().lstrip("{").strip()
                    if head in rooms:
                        targets.add(head)
                    elif head in reexport:
                        targets.add(reexport[head])
                    token = ""
                else:
                    token += ch
        targets.discard(a)
        for b in targets:
            arrows[a][b] += 1
            file_arrows[rel].add(b)

edges = {a: set(bs) for a, bs in arrows.items()}
n_arrows = sum(len(v) for v in edges.values())

# Tarjan.
index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, ()):
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
        comps.append(sorted(comp))


for r in sorted(rooms):
    if r not in index:
        visit(r)
circles = [c for c in comps if len(c) > 1]

print(f"rooms: {len(rooms)}")
print(f"arrows (room -> room): {n_arrows}")
print(f"circles: {len(circles)} ({', '.join(str(len(c)) + ' rooms' for c in circles)})")
for c in circles:
    print("  circle:", " ".join(c))
print("out-arrows per room:")
for r in sorted(rooms, key=lambda r: -len(edges.get(r, ()))):
    outs = sorted(edges.get(r, ()))
    ins = sorted(a for a in rooms if r in edges.get(a, ()))
    print(f"  {r:12} out {len(outs):2} in {len(ins):2}: {' '.join(outs)}")
if by_file:
    for rel in sorted(file_arrows):
        print(f"  {rel}: {' '.join(sorted(file_arrows[rel]))}")
