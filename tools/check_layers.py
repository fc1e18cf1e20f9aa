#!/usr/bin/env python3
"""Fails when a source file includes from a layer above its own, when two
modules include each other (directly or round a longer loop), or when the CLI
reaches past the public headers and the internal headers of the rooms it
drives (CLI_INTERNAL), or an example past the public headers.

The layers, bottom to top (docs/architecture.md says what each holds):
a file may include its own folder and any folder of a lower layer. A public
header include/diffattn/X.h belongs to the layer of the subsystem it declares.

Usage: tools/check_layers.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
Exit 0 when the tree is clean, 1 with one line per violation otherwise."""
import os
import re
import sys

# folder under src/ -> layer; folders of one layer may not include each other
LAYERS = {
    "core": 0,
    "ops": 1,
    "attn": 2,
    "model": 3,
    "io": 4,
    "tok": 5,
    "data": 6,
    "parallel": 7,
    "train": 8,
    "infer": 9,
    "quant": 10,
    "eval": 11,
    "tasks": 12,
    "study": 12,
    "bench": 12,
    "experiments": 13,
    "serve": 14,
    "cli": 15,
}
# the rooms whose headers are internal (not in include/) but that the CLI
# drives: it may include their headers; examples/ may not
CLI_INTERNAL = {"eval", "experiments", "tasks", "study", "bench", "serve"}
# public headers -> the layer that implements them
PUBLIC = {
    "diffattn/core.h": "core",
    "diffattn/rng.h": "core",
    "diffattn/exec.h": "core",
    "diffattn/fields.h": "core",
    "diffattn/config.h": "core",
    "diffattn/parallel.h": "parallel",
    "diffattn/attention.h": "attn",
    "diffattn/model.h": "model",
    "diffattn/formats.h": "io",
    "diffattn/tokenizer.h": "tok",
    "diffattn/data.h": "data",
    "diffattn/train.h": "train",
    "diffattn/generate.h": "infer",
    "diffattn/quant.h": "quant",
    "diffattn.h": "cli",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of_include(inc, here):
    """(kind, folder) of an include: ("public", layer folder) or ("private", src folder)."""
    if inc in PUBLIC:
        return "public", PUBLIC[inc]
    if inc.startswith("diffattn/"):
        return "unknown-public", None
    if "/" in inc:
        return "private", inc.split("/", 1)[0]
    return "private", here  # a bare name: the including file's own folder


def check(root):
    errors = []
    edges = {}  # module -> modules it includes (private includes only), for the cycle check
    src = os.path.join(root, "src")
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            folder = rel.split(os.sep)[0] if os.sep in rel else ""
            if folder not in LAYERS:
                errors.append(f"src/{rel}: not in a layer folder ({', '.join(LAYERS)})")
                continue
            module = os.path.splitext(rel)[0]
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                kind, target = folder_of_include(inc, folder)
                if kind == "unknown-public":
                    errors.append(f"src/{rel}: includes \"{inc}\", which is not a known public header")
                    continue
                if target not in LAYERS:
                    errors.append(f"src/{rel}: includes \"{inc}\" from unknown folder \"{target}\"")
                    continue
                if folder == "cli" and kind == "private" and target not in CLI_INTERNAL | {"cli"}:
                    errors.append(f"src/{rel}: the CLI includes the private header \"{inc}\"; use include/, "
                                  f"or the headers of {', '.join(sorted(CLI_INTERNAL))}")
                    continue
                if LAYERS[target] > LAYERS[folder]:
                    errors.append(f"src/{rel}: upward include \"{inc}\" ({target}, layer {LAYERS[target]}) "
                                  f"from {folder} (layer {LAYERS[folder]})")
                elif LAYERS[target] == LAYERS[folder] and target != folder:
                    errors.append(f"src/{rel}: \"{inc}\" is in {target}, a sibling of {folder} in the same layer")
                if kind == "private":
                    dep = os.path.splitext(inc if "/" in inc else os.path.join(folder, inc))[0]
                    if dep != module:
                        edges.setdefault(module, set()).add(dep)
    errors += cycles(edges)
    for top in ("examples",):
        base = os.path.join(root, top)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if name.endswith((".c", ".h", ".cc", ".cpp")):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        for inc in INCLUDE.findall(f.read()):
                            if inc not in PUBLIC:
                                errors.append(f"{os.path.relpath(path, root)}: includes \"{inc}\"; "
                                              f"examples use the public headers only")
    return errors


def cycles(edges):
    """One line per include cycle between modules (a module: a .c and its .h)."""
    found, state, stack = [], {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                loop = stack[stack.index(n):] + [n]
                found.append("include cycle: " + " -> ".join(loop))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} violation(s); the order is in docs/architecture.md")
        return 1
    print("check_layers: every include points down or sideways within its folder; no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
