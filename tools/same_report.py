#!/usr/bin/env python3
"""Whether two studies' report.json agree, their timing fields aside (keys
ending in "seconds": train_seconds, eval_seconds, wall_seconds).

The fixed studies of issue 44 ("behaviour unchanged"), run by the build
before and the build after a change, each into the same --out:
    diffattn compare --task mqar --grid heads=1,2 --seeds 2 --steps 150 --eval-every 20 \\
        --eval-seqs 64 --dim 32 --seq 64 --pairs 4 --batch 8 --out OUT/mqar --quiet
    diffattn compare --steps 30 --dim 32 --layers 2 --heads 2 --seq 256 --batch 4 \\
        --archs diff,softmax --out OUT/needle --quiet
(plain compare's report.json names its data file, so both runs need the same --out).

Usage: tools/same_report.py A/report.json B/report.json
Exit 0 when they agree, 1 with the first differing paths otherwise."""
import json
import sys


def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if not k.endswith("seconds")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o


def diff(a, b, path, out):
    if type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'B' if k not in a else 'A'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} != {b!r}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    a, b = (strip(json.load(open(p, encoding="utf-8"))) for p in sys.argv[1:3])
    out = []
    diff(a, b, "", out)
    for line in out[:40]:
        print(line)
    if out:
        print(f"same_report: {len(out)} difference(s)")
        return 1
    print(f"same_report: {sys.argv[1]} and {sys.argv[2]} agree, timing fields aside")
    return 0


if __name__ == "__main__":
    sys.exit(main())
