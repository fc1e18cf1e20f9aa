#!/usr/bin/env python3
"""Fails when the public API outgrows its budget: the headers under include/
hold at most MAX_LINES lines in all, and none of them is a study, experiment,
benchmark, plot or report header (those rooms are internal: docs/architecture.md).

Usage: tools/check_public_api.py [ROOT]   (ROOT: the repository, default: this script's parent's parent)
Exit 0 within the budget, 1 with one line per breach otherwise."""
import os
import re
import sys

MAX_LINES = 1500
INTERNAL = re.compile(r"experiment|study|studies|bench|plot|report", re.I)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    include = os.path.join(root, "include")
    headers, total, errors = [], 0, []
    for d, _, files in os.walk(include):
        for f in sorted(files):
            if f.endswith(".h"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as fp:
                    total += sum(1 for _ in fp)
                headers.append(rel)
                if INTERNAL.search(os.path.relpath(path, include)):
                    errors.append(f"{rel}: a study, experiment, benchmark, plot or report header is internal "
                                  "(move it under src/)")
    if not headers:
        errors.append(f"{include}: no public header found")
    if total >= MAX_LINES:
        errors.append(f"include/: {total} lines in {len(headers)} headers, the budget is under {MAX_LINES} "
                      "(move what a library user does not call under src/)")
    for e in errors:
        print(e)
    if not errors:
        print(f"include/: {total} lines in {len(headers)} headers (budget: under {MAX_LINES})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
