#!/usr/bin/env python3
"""Writes the version script of libdiffattn.so: the functions and variables
the public headers under include/ declare are global, everything else local.
Internal functions keep the da_ prefix too, so the prefix alone would export
them: the list comes from the headers (check_headers.py's parser).

Usage: tools/export_map.py ROOT OUT   (OUT is rewritten only when its text changes)
       tools/export_map.py ROOT --list  (the names, one a line)"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_headers import declared  # noqa: E402
from longest_functions import blank_out, blank_preprocessor  # noqa: E402

EXTERN_VAR = re.compile(r"\bextern\s+[^;(){}]*?\b(da_\w+)\s*(?:\[[^\]]*\])?\s*;")


def public_names(root):
    names = set()
    for d, _, files in os.walk(os.path.join(root, "include")):
        for f in files:
            if f.endswith(".h"):
                with open(os.path.join(d, f), encoding="utf-8") as fp:
                    text = fp.read()
                names.update(declared(text))
                names.update(EXTERN_VAR.findall(blank_preprocessor(blank_out(text))))
    return sorted(names)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    names = public_names(sys.argv[1])
    if sys.argv[2] == "--list":
        print("\n".join(names))
        return
    text = ("/* Written by tools/export_map.py from include/: the symbols libdiffattn.so exports. */\n{\n  global:\n"
            + "".join(f"    {n};\n" for n in names) + "  local: *;\n};\n")
    try:
        with open(sys.argv[2], encoding="utf-8") as fp:
            if fp.read() == text:
                return
    except OSError:
        pass
    with open(sys.argv[2], "w", encoding="utf-8") as fp:
        fp.write(text)


if __name__ == "__main__":
    main()
