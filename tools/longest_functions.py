#!/usr/bin/env python3
"""Lists the longest C function definitions, longest first.

A function's length is its lines from the first line of its signature to its
closing brace, both included (comments and blank lines inside count).

Usage: tools/longest_functions.py [--top N] [--cli] [--min LINES] [--skip FILE]... [PATH ...]
  PATH    files or folders to scan (default: src/, without src/cli/ unless --cli)
  --top   how many to list (default 10)
  --cli   with the default paths, also scan src/cli/
  --min   list only functions of at least this many lines (exit 1 if any):
          a check that no function is over a limit
  --skip  leave this file out (repeatable; a path as given or relative to the repository)
Each line: LINES  FILE:LINE  NAME"""
import os
import re
import sys

IDENT_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*$")


def blank_out(text):
    """text with comments, string and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_preprocessor(text):
    """Preprocessor lines (with their continuations) replaced by spaces."""
    lines, out, cont = text.split("\n"), [], False
    for line in lines:
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append(" " * len(line))
        else:
            out.append(line)
    return "\n".join(out)


def function_name(header):
    """The defined function's name from the text before its body, or None."""
    h = " ".join(header.split())
    if not h.endswith(")") or "=" in h.split("(")[0]:
        return None
    if re.match(r"^(typedef|struct|union|enum)\b", h) and "(" not in h:
        return None
    # the parameter list: the last top-level parenthesized group
    depth, start = 0, None
    for k in range(len(h) - 1, -1, -1):
        if h[k] == ")":
            depth += 1
        elif h[k] == "(":
            depth -= 1
            if depth == 0:
                start = k
                break
    if start is None:
        return None
    m = IDENT_BEFORE_PAREN.search(h[:start])
    if not m or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof", "__attribute__"):
        return None
    return m.group(1)


def definitions(code):
    """Each file-scope brace block of code (comments, strings and preprocessor
    lines blanked): (header, first, open, close), where header is the text
    before the block since the previous statement or block, first the index
    of its first non-blank character, open and close the braces' indices."""
    depth, last_end, header, first, start = 0, 0, "", 0, 0
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                header = code[last_end:i]
                first = last_end + (len(header) - len(header.lstrip()))
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                yield header, first, start, i
                last_end = i + 1
        elif c == ";" and depth == 0:
            last_end = i + 1


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as fp:
        text = fp.read()
    code = blank_preprocessor(blank_out(text))
    found = []
    for header, first, _, close in definitions(code):
        name = function_name(header)
        if name:
            l0 = code.count("\n", 0, first) + 1
            l1 = code.count("\n", 0, close) + 1
            found.append((l1 - l0 + 1, path, l0, name))
    return found


def main(argv):
    top, with_cli, minimum, paths, skip = 10, False, None, [], set()
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--top":
            top = int(args.pop(0))
        elif a == "--cli":
            with_cli = True
        elif a == "--min":
            minimum = int(args.pop(0))
        elif a == "--skip":
            skip.add(os.path.realpath(args.pop(0)))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            paths.append(a)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    skip_cli = not paths and not with_cli
    if not paths:
        paths = [os.path.join(root, "src")]
    files = []
    for p in paths:
        if os.path.isfile(p):
            files.append(p)
            continue
        for d, _, names in sorted(os.walk(p)):
            if skip_cli and os.path.relpath(d, root).split(os.sep)[:2] == ["src", "cli"]:
                continue
            files += [os.path.join(d, f) for f in sorted(names) if f.endswith(".c")]
    files = [f for f in files if os.path.realpath(f) not in skip]
    found = sorted((f for path in files for f in functions(path)), key=lambda f: (-f[0], f[1], f[2]))
    if minimum is not None:
        found = [f for f in found if f[0] >= minimum]
    else:
        found = found[:top]
    for lines, path, line, name in found:
        print(f"{lines:5d}  {os.path.relpath(path, root)}:{line}  {name}")
    return 1 if minimum is not None and found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
