#!/usr/bin/env python3
"""Fails when two source files of src/ depend on each other, directly or round
a longer loop.

Definitions, per .c file F under src/:
  - F defines a function when its body is in F at file scope and it is not
    `static` (a static function is F's own business and makes no edge);
  - F uses a function g when g's name appears inside a brace block of F (a
    call in a function body, or g's address in a file-scope table of function
    pointers) and F does not define g itself;
  - F -> G (F depends on G) when F uses a function that G defines. A name
    defined in several files (one kernel compiled per instruction set) makes
    no edge, and neither does a variable (the table of attention variants
    names each variant's entry, defined in the variant's file).
A file-level cycle is a strongly connected component of this graph with two
or more files: each reaches every other through calls. (Include cycles between
a .c/.h pair and another are tools/check_layers.py's.)

Each cycle is printed with the calls that close it. A cycle listed in KNOWN
below is printed with its reason and does not fail the check; any other does,
and so does a KNOWN entry that no longer occurs (remove it).

Usage: tools/check_file_cycles.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
Exit 0 when every cycle is known, 1 otherwise."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from longest_functions import blank_out, blank_preprocessor, definitions, function_name  # noqa: E402

# cycles that remain, by their files (relative to src/), with the reason
KNOWN = {
}

IDENT = re.compile(r"[A-Za-z_]\w*")


def scan(path):
    """(functions defined and not static, identifiers used in function bodies) of one file."""
    with open(path, encoding="utf-8", errors="replace") as fp:
        code = blank_preprocessor(blank_out(fp.read()))
    defined, used = set(), set()
    for header, _, start, end in definitions(code):
        name = function_name(header)
        if name and not re.search(r"\bstatic\b", header):
            defined.add(name)
        used.update(IDENT.findall(code[start:end]))
    return defined, used


def graph(src):
    files = {}
    for d, _, names in sorted(os.walk(src)):
        for n in sorted(names):
            if n.endswith(".c"):
                path = os.path.join(d, n)
                files[os.path.relpath(path, src)] = scan(path)
    owner = {}
    for f, (defined, _) in files.items():
        for name in defined:
            owner.setdefault(name, set()).add(f)
    edges = {f: {} for f in files}  # f -> {g: [names f uses from g]}
    for f, (defined, used) in files.items():
        for name in sorted(used - defined):
            where = owner.get(name, ())
            if len(where) == 1:
                g = next(iter(where))
                if g != f:
                    edges[f].setdefault(g, []).append(name)
    return edges


def components(edges):
    """Strongly connected components with two or more files (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def describe(comp, edges):
    parts = []
    for f in comp:
        for g in comp:
            if g in edges[f]:
                names = edges[f][g]
                more = f" (+{len(names) - 3} more)" if len(names) > 3 else ""
                parts.append(f"{f} -> {g}: {', '.join(names[:3])}{more}")
    return "; ".join(parts)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    edges = graph(os.path.join(root, "src"))
    comps = components(edges)
    failures, seen = 0, set()
    for comp in comps:
        key = frozenset(comp)
        seen.add(key)
        if key in KNOWN:
            print(f"known cycle {' <-> '.join(comp)}: {KNOWN[key]}\n    {describe(comp, edges)}")
        else:
            failures += 1
            print(f"cycle {' <-> '.join(comp)}\n    {describe(comp, edges)}")
    for key in KNOWN:
        if key not in seen:
            failures += 1
            print(f"{' <-> '.join(sorted(key))}: listed in KNOWN but no longer a cycle; remove it")
    if failures:
        print(f"check_file_cycles: {failures} problem(s)")
        return 1
    print(f"check_file_cycles: no file-level cycles but the {len(KNOWN)} known ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
