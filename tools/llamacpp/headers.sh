#!/usr/bin/env bash
# Extracts the C headers of the llama.cpp release that node-llama-cpp ships
# (include/llama.h and ggml/include/*.h), and its Python GGUF library gguf-py
# (the reference writer of llama.cpp's files), from its source bundle,
# node_modules/node-llama-cpp/llama/gitRelease.bundle, into OUT_DIR, so that
# the driver is compiled against exactly the headers of the prebuilt libraries.
# Usage: headers.sh BUNDLE OUT_DIR   (CMake runs it when the package is present)
set -euo pipefail
BUNDLE=$1
OUT=$2
[[ -f $BUNDLE ]] || { echo "headers.sh: $BUNDLE not found (tools/install-deps.sh installs node-llama-cpp)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git -C "$T" init -q
git -C "$T" fetch -q "$(realpath "$BUNDLE")" HEAD
mkdir -p "$OUT.tmp"
git -C "$T" archive FETCH_HEAD include/llama.h ggml/include gguf-py | tar -x -C "$OUT.tmp"
git -C "$T" rev-parse FETCH_HEAD > "$OUT.tmp/COMMIT"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
