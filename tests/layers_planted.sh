#!/usr/bin/env bash
# tools/check_layers.py passes on the tree, and fails on a copy of it with
# each kind of violation planted: an upward include, a cycle between two
# modules, the CLI reaching a private header outside the rooms it drives, an
# example reaching one of those rooms, and two rooms of one layer (tasks/,
# study/) including each other.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
check="$root/tools/check_layers.py"
python3 "$check" "$root" || { fail "the tree itself fails the check"; finish; }
plant() { # plant NAME FILE LINE: copy the tree, add LINE to FILE, expect a failure naming FILE
    rm -rf "$TMP/t" && mkdir -p "$TMP/t" && cp -r "$root/src" "$root/include" "$root/examples" "$TMP/t/"
    printf '%s\n' "$3" >> "$TMP/t/$2"
    local out
    if out=$(python3 "$check" "$TMP/t"); then fail "$1 planted in $2" "not caught"
    else has "$1 planted in $2 is caught" "$out" "$4"; fi
}
plant "upward include" src/ops/rmsnorm.c '#include "model/model.h"' 'upward include "model/model.h"'
plant "upward public include" src/core/rng.c '#include "diffattn/train.h"' 'upward include "diffattn/train.h"'
plant "cycle" src/io/atomic_file.c '#include "io/gguf.h"' 'include cycle'
plant "cli private" src/cli/main.c '#include "io/npy.h"' 'private header'
plant "example internal" examples/attention.c '#include "experiments/compare.h"' 'examples use the public headers only'
plant "sibling room" src/tasks/tasks.c '#include "study/grid.h"' 'a sibling of tasks'
finish
