#!/usr/bin/env bash
# tools/check_layers.py passes on the tree, and fails on a copy of it with
# each kind of violation planted: an upward include, a cycle between two
# modules, and the CLI reaching a private header.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check="$root/tools/check_layers.py"
python3 "$check" "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plant() { # plant NAME FILE LINE: copy the tree, add LINE to FILE, expect a failure naming FILE
    rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r "$root/src" "$root/include" "$tmp/t/"
    printf '%s\n' "$3" >> "$tmp/t/$2"
    if out=$(python3 "$check" "$tmp/t"); then
        echo "FAIL: $1 planted in $2 was not caught"; exit 1
    fi
    grep -q "$4" <<<"$out" || { echo "FAIL: $1: the report does not say '$4':"; echo "$out"; exit 1; }
    echo "ok: $1 caught"
}
plant "upward include" src/ops/rmsnorm.c '#include "model/model.h"' 'upward include "model/model.h"'
plant "upward public include" src/core/rng.c '#include "diffattn/train.h"' 'upward include "diffattn/train.h"'
plant "cycle" src/io/atomic_file.c '#include "io/gguf.h"' 'include cycle'
plant "cli private" src/cli/main.c '#include "io/npy.h"' 'private header'
echo "layers_planted: 4 passed, 0 failed"
