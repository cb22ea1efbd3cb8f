#!/usr/bin/env bash
# Checks the shim's lock rules with clang's thread-safety analysis (base/thread_annotations.h):
# compiles every shim source, base/log.cc (the log's lock, which the shim takes second) and the
# fake CUDA's host memory with clang++ -fsyntax-only -Wthread-safety -Werror. First a probe that
# breaks a rule must be refused: a clang that ignored the attributes would pass anything.
#
# Usage: thread_safety_check.sh SOURCE_DIR [COMPILER FLAG...]. Exits 77 (skip) without clang++.
set -euo pipefail
root=$1
shift
clang=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clang" ]; then
  echo "SKIP: needs clang++ (apt-get install clang-14)"
  exit 77
fi
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror -I"$root" "$@")

if probe=$("$clang" "${flags[@]}" "$root/shim/testing/thread_safety_probe.cc" 2>&1); then
  echo "FAIL: $clang accepted shim/testing/thread_safety_probe.cc, which breaks a lock rule"
  exit 1
fi
if ! grep -q -- "-Wthread-safety" <<<"$probe"; then
  echo "FAIL: the probe was refused for another reason than the analysis:"
  echo "$probe"
  exit 1
fi

sources=("$root/base/log.cc" "$root/shim/testing/fake_host_memory.cc")
for source in "$root"/shim/*.cc; do
  case "$source" in *_test.cc) ;; *) sources+=("$source") ;; esac
done
failed=0
for source in "${sources[@]}"; do
  "$clang" "${flags[@]}" "$source" || failed=1
done
[ "$failed" -eq 0 ] && echo "${#sources[@]} sources pass $("$clang" --version | head -1)'s thread-safety analysis"
exit "$failed"
