#!/usr/bin/env bash
# The installed library is usable on its own: `cmake --install` into a fresh
# prefix, then examples/generate.c, copied out of the tree, builds with
# `pkg-config --cflags --libs diffattn` alone (and with find_package(diffattn)),
# links only libdiffattn.so (no cairo, MPI or BLAS on its link line), and
# generates from a model made by the installed CLI exactly what
# `diffattn sample --temperature 0` does.
# Usage: install_example.sh BUILD_DIR. Each step needs the one before: the first failure ends the test.
source "$(dirname "$0")/lib.sh"
set -o pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
stop() { fail "$1"; finish; }

cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null || stop "cmake --install"
pc=$(find "$TMP/prefix" -name diffattn.pc | head -1)
[[ -n $pc ]] || stop "no diffattn.pc installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs diffattn) || stop "pkg-config --cflags --libs diffattn"
echo "pkg-config: $flags"
[[ $flags != *cairo* && $flags != *mpi* && $flags != *openblas* ]] || stop "private dependencies on the public flags"
soname=$(readelf -d "$TMP/prefix"/lib*/libdiffattn.so | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p') || stop "readelf of libdiffattn.so"
[[ $soname == libdiffattn.so.[0-9]* ]] || stop "SONAME is '$soname'"
pass "installed, SONAME $soname"

mkdir "$TMP/example"
cp "$SRC/examples/generate.c" "$TMP/example/"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$TMP/example/generate.c" $flags -o "$TMP/generate" || stop "building the example"
needed=$(readelf -d "$TMP/generate" | grep NEEDED) || stop "readelf of the example"
[[ $needed != *cairo* && $needed != *mpi* ]] || stop "the example links private dependencies: $needed"
pass "examples/generate.c built with pkg-config alone"

"$TMP/prefix/bin/diffattn" init --out "$TMP/tiny.safetensors" --dim 64 --layers 2 --heads 2 --seed 7 >/dev/null ||
  stop "the installed diffattn init"
libdir=$(dirname "$(ls "$TMP"/prefix/lib*/libdiffattn.so)")
got=$(LD_LIBRARY_PATH=$libdir "$TMP/generate" "$TMP/tiny.safetensors" 12) || stop "the example failed"
# the CLI's greedy text from an empty prompt (a newline, token 10) as byte ids
"$TMP/prefix/bin/diffattn" sample --model "$TMP/tiny.safetensors" --temperature 0 --max-new 12 >"$TMP/sample.txt" 2>/dev/null ||
  stop "diffattn sample"
want=$(head -c 12 "$TMP/sample.txt" | od -An -tu1 | xargs)
echo "example: $got"
echo "sample:  $want"
[[ $(wc -w <<<"$got") == 12 && $got == "$want" ]] || stop "the example's tokens differ from diffattn sample's"
pass "the example generates what diffattn sample does"

# the CMake package: find_package(diffattn) and diffattn::diffattn
mkdir "$TMP/cmake_example"
cat > "$TMP/cmake_example/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(generate_example C)
find_package(diffattn 0.1 REQUIRED)
add_executable(generate generate.c)
target_link_libraries(generate PRIVATE diffattn::diffattn)
CM
cp "$SRC/examples/generate.c" "$TMP/cmake_example/"
cmake -S "$TMP/cmake_example" -B "$TMP/cmake_build" -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null || stop "find_package(diffattn)"
cmake --build "$TMP/cmake_build" >/dev/null || stop "building against diffattn::diffattn"
got2=$(LD_LIBRARY_PATH=$libdir "$TMP/cmake_build/generate" "$TMP/tiny.safetensors" 12) || stop "the find_package build failed to run"
[[ $got2 == "$got" ]] || stop "the find_package build generates '$got2'"
pass "find_package(diffattn) builds it too"
finish
