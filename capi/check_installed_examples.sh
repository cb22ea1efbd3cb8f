#!/usr/bin/env bash
# The library as an engine gets it: `cmake --install` into a temporary prefix, then examples/
# configured out of the tree with find_package(hugepin), and the C example also built with plain
# `cc` and pkg-config; each runs a TP=2 offload (host memcpy, workers in their own processes) and
# must exit 0. Nothing here reads the build tree but the install step.
# Usage: check_installed_examples.sh BUILD_DIR EXAMPLES_DIR
set -euo pipefail
build=$1
examples=$2
work=$(mktemp -d /tmp/hugepin-examples-XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libhugepin.so' | head -1)")

echo "== find_package(hugepin) from $prefix"
cmake -S "$examples" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/offload_c"
"$work/build/offload_cpp"

echo "== cc \$(pkg-config --cflags --libs hugepin)"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$work/offload_c_pc" "$examples/c/offload.c" $(pkg-config --cflags --libs hugepin)
"$work/offload_c_pc"

# The installed library needs nothing from the build tree.
if ldd "$work/offload_c_pc" | grep -q "$build"; then
  echo "check_installed_examples: the example links against the build tree" >&2
  exit 1
fi
echo "check_installed_examples: OK"
