#!/usr/bin/env python3
"""Fails when two source files of src/ depend on each other, directly or round
a longer loop, header inline functions included.

Definitions, per .c file F under src/ and per header H under src/ and include/:
  - F defines a function when its body is in F at file scope and it is not
    `static` (a static function is F's own business and makes no edge);
  - H defines each function whose body is in H (a `static inline` one): the
    compiler copies it into every file that calls it, so a call to it is a
    call into H, and the calls in its body are H's;
  - a file uses a function g when g's name appears inside a brace block of
    the file (a call in a function body, or g's address in a file-scope table
    of function pointers) and the file does not define g itself, static or not;
  - X -> Y (X depends on Y) when X uses a function that Y defines. A name
    defined in several files (one kernel compiled per instruction set) makes
    no edge, and neither does a variable (the table of attention variants
    names each variant's entry, defined in the variant's file).
A file-level cycle is a strongly connected component of this graph with two
or more files: each reaches every other through calls. A header takes part
when its inline functions call into a file that calls them back, or calls a
file that reaches one that calls them (variants.c calling an inline of
variant_common.h that calls variants.c back is such a circle). (Include
cycles between a .c/.h pair and another are tools/check_layers.py's.)

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

# cycles that remain, by their files (relative to src/; include/ headers relative to the repository), with the reason
KNOWN = {
}

IDENT = re.compile(r"[A-Za-z_]\w*")


def scan(path):
    """(functions it defines for others, every function it defines, identifiers used in function bodies) of
    one file: a .c file's functions that are not static; a header's functions all (its inline ones)."""
    with open(path, encoding="utf-8", errors="replace") as fp:
        text = fp.read()
    header_file = path.endswith(".h")
    if header_file:  # a public header's C++ guard is no block: the functions inside it are at file scope
        text = re.sub(r'extern\s+"C"\s*\{', "", text)
        text = re.sub(r"#ifdef\s+__cplusplus\s*\n\s*\}\s*\n\s*#endif", "", text)
    code = blank_preprocessor(blank_out(text))
    exported, local, used = set(), set(), set()
    for header, _, start, end in definitions(code):
        name = function_name(header)
        if name:
            local.add(name)
            if header_file or not re.search(r"\bstatic\b", header):
                exported.add(name)
        if name or not header_file:  # a header's structs name types and fields, not calls
            used.update(IDENT.findall(code[start:end]))
    return exported, local, used


def source_files(root):
    """{name: path} of the .c and .h files of src/ (named relative to src/) and the headers of include/ (named
    relative to the repository)."""
    files = {}
    for top, ends, base in (("src", (".c", ".h"), "src"), ("include", (".h",), "")):
        for d, _, names in sorted(os.walk(os.path.join(root, top))):
            for n in sorted(names):
                if n.endswith(ends):
                    path = os.path.join(d, n)
                    files[os.path.relpath(path, os.path.join(root, base))] = path
    return files


def graph(root):
    files = {name: scan(path) for name, path in source_files(root).items()}
    owner = {}
    for f, (exported, _, _) in files.items():
        for name in exported:
            owner.setdefault(name, set()).add(f)
    edges = {f: {} for f in files}  # f -> {g: [names f uses from g]}
    for f, (_, local, used) in files.items():
        for name in sorted(used - local):
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
    edges = graph(root)
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
