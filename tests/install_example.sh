#!/usr/bin/env bash
# The installed library is usable on its own: `cmake --install` into a fresh
# prefix, then examples/generate.c, copied out of the tree, builds with
# `pkg-config --cflags --libs diffattn` alone (and with find_package(diffattn)),
# links only libdiffattn.so (no cairo, MPI or BLAS on its link line), and
# generates from a model made by the installed CLI exactly what
# `diffattn sample --temperature 0` does.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL $*"; exit 1; }

cmake --install "$BUILD" --prefix "$T/prefix" >/dev/null
pc=$(find "$T/prefix" -name diffattn.pc | head -1)
[[ -n $pc ]] || fail "no diffattn.pc installed"
export PKG_CONFIG_PATH=$(dirname "$pc")
flags=$(pkg-config --cflags --libs diffattn)
echo "pkg-config: $flags"
[[ $flags != *cairo* && $flags != *mpi* && $flags != *openblas* ]] || fail "private dependencies on the public flags"
soname=$(readelf -d "$T/prefix"/lib*/libdiffattn.so | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[[ $soname == libdiffattn.so.[0-9]* ]] || fail "SONAME is '$soname'"
echo "ok   installed, SONAME $soname"

mkdir "$T/example"
cp "$SRC/examples/generate.c" "$T/example/"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$T/example/generate.c" $flags -o "$T/generate" || fail "building the example"
needed=$(readelf -d "$T/generate" | grep NEEDED)
[[ $needed != *cairo* && $needed != *mpi* ]] || fail "the example links private dependencies: $needed"
echo "ok   examples/generate.c built with pkg-config alone"

"$T/prefix/bin/diffattn" init --out "$T/tiny.safetensors" --dim 64 --layers 2 --heads 2 --seed 7 >/dev/null
libdir=$(dirname "$(ls "$T"/prefix/lib*/libdiffattn.so)")
got=$(LD_LIBRARY_PATH=$libdir "$T/generate" "$T/tiny.safetensors" 12)
# the CLI's greedy text from an empty prompt (a newline, token 10) as byte ids
"$T/prefix/bin/diffattn" sample --model "$T/tiny.safetensors" --temperature 0 --max-new 12 >"$T/sample.txt" 2>/dev/null ||
  fail "diffattn sample"
want=$(head -c 12 "$T/sample.txt" | od -An -tu1 | xargs)
echo "example: $got"
echo "sample:  $want"
[[ $(wc -w <<<"$got") == 12 && $got == "$want" ]] || fail "the example's tokens differ from diffattn sample's"
echo "ok   the example generates what diffattn sample does"

# the CMake package: find_package(diffattn) and diffattn::diffattn
mkdir "$T/cmake_example"
cat > "$T/cmake_example/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(generate_example C)
find_package(diffattn 0.1 REQUIRED)
add_executable(generate generate.c)
target_link_libraries(generate PRIVATE diffattn::diffattn)
CM
cp "$SRC/examples/generate.c" "$T/cmake_example/"
cmake -S "$T/cmake_example" -B "$T/cmake_build" -DCMAKE_PREFIX_PATH="$T/prefix" >/dev/null || fail "find_package(diffattn)"
cmake --build "$T/cmake_build" >/dev/null || fail "building against diffattn::diffattn"
got2=$(LD_LIBRARY_PATH=$libdir "$T/cmake_build/generate" "$T/tiny.safetensors" 12)
[[ $got2 == "$got" ]] || fail "the find_package build generates '$got2'"
echo "ok   find_package(diffattn) builds it too"
