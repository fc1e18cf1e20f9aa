#!/usr/bin/env python3
"""Fails when docs/architecture.md names a file that does not exist.

Every `code span` of the page that names a file is checked:
  - a path from the repository's root (src/..., include/..., tools/...,
    tests/..., docs/..., examples/..., cmake/..., bench/...), any extension;
  - a public header, diffattn.h or diffattn/NAME.h (under include/);
  - FOLDER/NAME under src/ (model/probe.h), FOLDER one of src/'s folders;
  - a bare source name (NAME.c, NAME.h, NAME.py, NAME.sh): in the folder of
    the paragraph that opens with **FOLDER/** when there is one, else
    anywhere under src/ or tools/.
A name with a * must match at least one file; one with <...> (a placeholder)
is skipped, as are files a run writes (report.json, model.safetensors, ...).

Usage: tools/check_doc_paths.py [ROOT] [PAGE]   (ROOT: the repository, default: this script's parent's
parent; PAGE: default docs/architecture.md)
Exit 0 when every name is found, 1 with one line per missing name otherwise."""
import glob
import os
import re
import sys

SPAN = re.compile(r"`([^`\n]+)`")
ROOTS = ("src/", "include/", "tools/", "tests/", "docs/", "examples/", "cmake/", "bench/")
SOURCE = (".c", ".h", ".py", ".sh")
FOLDER_PARAGRAPH = re.compile(r"^\*\*([a-z_]+)/\*\*")
NAME = re.compile(r"^[\w.*/-]+$")


def exists(root, rel):
    return bool(glob.glob(os.path.join(root, rel))) if "*" in rel else os.path.exists(os.path.join(root, rel))


def candidates(root, token, folder):
    """The places token may name, or None when it names no source file."""
    src_folders = {d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d))}
    if token in ("CMakeLists.txt", "Makefile", "README.md"):
        return [token]
    if token == "diffattn.h" or token.startswith("diffattn/"):
        return ["include/" + token]
    if "/" in token:  # bench/ is a folder of the root and of src/
        places = [token] if token.startswith(ROOTS) else []
        places += ["src/" + token] if token.split("/", 1)[0] in src_folders else []
        return places or None
    if token.endswith(SOURCE):
        if folder:
            return [f"src/{folder}/{token}"]
        return [f"src/*/{token}", f"include/diffattn/{token}", f"tools/{token}", f"tests/{token}"]
    return None


def check(root, page):
    errors, folder = [], None
    with open(os.path.join(root, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        m = FOLDER_PARAGRAPH.match(line)
        if m:
            folder = m.group(1)
        elif not line.strip() or line.startswith("#"):
            folder = None  # a paragraph ends at a blank line or a heading
        for token in SPAN.findall(line):
            token = token.strip()
            if "<" in token or not NAME.match(token):
                continue
            places = candidates(root, token, folder)
            if places is None:
                continue
            if not any(exists(root, p) for p in places):
                errors.append(f"{page}:{n}: `{token}` names no file (looked for {', '.join(places)})")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    page = sys.argv[2] if len(sys.argv) > 2 else "docs/architecture.md"
    errors = check(root, page)
    for e in errors:
        print(e)
    if errors:
        print(f"check_doc_paths: {len(errors)} name(s) in {page} without a file")
        return 1
    print(f"check_doc_paths: every file {page} names exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
