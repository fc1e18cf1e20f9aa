#!/usr/bin/env python3
"""Fails when a public header does not match the files that implement it.

Every header under include/ that declares a function carries a line
    Implemented in src/a/b.c, src/a/c.c
(in a comment; it may wrap over several comment lines, and every src/...c path
in that comment counts). The check:
  - each named file exists;
  - each function the header declares (at file scope, outside structs, not a
    typedef) is defined in one of the named files;
  - each named file defines at least one of the header's functions (a file
    named for nothing is a stale name).
A header that declares no function (types only, or an umbrella) needs no line.

Usage: tools/check_headers.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
Exit 0 when every header matches, 1 with one line per mismatch otherwise."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from longest_functions import blank_out, blank_preprocessor, function_name, functions  # noqa: E402

IMPLEMENTED = re.compile(r"Implemented in\b(.*?)(?:\*/|\n\s*\n)", re.S)
SRC_PATH = re.compile(r"src/[\w./-]+\.c\b")
ATTRIBUTE = re.compile(r"__attribute__\s*\(\(.*?\)\)\s*$", re.S)


def named_files(text):
    m = IMPLEMENTED.search(text)
    return SRC_PATH.findall(m.group(1)) if m else None


def declared(text):
    """Names of the functions a header declares at file scope."""
    text = re.sub(r'extern\s+"C"\s*\{', "", text)
    text = re.sub(r"#ifdef\s+__cplusplus\s*\n\s*\}\s*\n\s*#endif", "", text)
    code = blank_preprocessor(blank_out(text))
    names, depth, start = [], 0, 0
    for i, c in enumerate(code):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            stmt = " ".join(code[start:i].split())
            start = i + 1
            if not stmt or "(" not in stmt or re.match(r"^(typedef|extern)\b", stmt):
                continue
            if re.search(r"\}\s*\w*$", stmt):  # the end of a struct or enum definition
                continue
            stmt = ATTRIBUTE.sub("", stmt).strip()
            name = function_name(stmt)
            if name and "(*" not in stmt.split(name)[0][-3:]:
                names.append(name)
        if c in "{}" and depth == 0:
            start = i + 1
    return names


def check(root):
    errors = []
    inc = os.path.join(root, "include")
    for d, _, files in sorted(os.walk(inc)):
        for f in sorted(files):
            if not f.endswith(".h"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as fp:
                text = fp.read()
            decl = declared(text)
            if not decl:
                continue
            files_named = named_files(text)
            if not files_named:
                errors.append(f"{rel}: declares {len(decl)} function(s) but names no implementing files "
                              f"(a comment line 'Implemented in src/...c, ...')")
                continue
            defined = {}
            for src in files_named:
                p = os.path.join(root, src)
                if not os.path.isfile(p):
                    errors.append(f"{rel}: names {src}, which does not exist")
                    continue
                defined[src] = {name for _, _, _, name in functions(p)}
            for name in decl:
                if not any(name in names for names in defined.values()):
                    errors.append(f"{rel}: {name} is defined in none of {', '.join(files_named)}")
            for src, names in defined.items():
                if not names & set(decl):
                    errors.append(f"{rel}: names {src}, which defines none of its functions")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_headers: {len(errors)} mismatch(es)")
        return 1
    print("check_headers: every public header's functions are defined in the files it names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
