#!/usr/bin/env bash
# Model-checks the offload protocol with spin: safety (assertions), progress (LTL under weak
# fairness), and mutants, deliberately broken variants that spin must catch, which shows that
# the properties can fail.
#
# Usage: check_model.sh MODEL.pml
# Exit status: 0 every check as expected; 1 a property failed, a mutant went uncaught, or a
# search did not complete; 77 (skip) when spin or gcc is missing.
# HUGEPIN_MODEL_DEEP=1 checks larger bounds (minutes instead of seconds).
set -euo pipefail

model=$(realpath "$1")
for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: needs $tool (Debian: apt-get install spin gcc)"
    exit 77
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

safety_bounds="-DMAXE=2"
progress_bounds="-DMAXE=1"
memory_mb=1024  # each search may use at most this much; running out fails the check
if [ "${HUGEPIN_MODEL_DEEP:-0}" = 1 ]; then
  safety_bounds="-DMAXE=2 -DTWO_CHUNK_JOBS"
  progress_bounds="-DMAXE=2"
  memory_mb=4096
fi
gcc_common="-O1 -w -DMEMLIM=$memory_mb"

# build NAME SPIN_FLAGS GCC_FLAGS: generates pan.c for the model in $work/NAME and compiles it.
build() {
  local dir="$work/$1"
  mkdir -p "$dir"
  cp "$model" "$dir/model.pml"
  if ! (cd "$dir" && spin $2 -a model.pml >spin.log 2>&1 && gcc $gcc_common $3 -o pan pan.c 2>gcc.log); then
    echo "FAIL: $1: spin -a or gcc failed"
    cat "$dir/spin.log" "$dir/gcc.log" 2>/dev/null | tail -20
    exit 1
  fi
}

# search NAME PAN_ARGS: runs pan; prints its summary; sets $errors, and $complete to 0 when the
# search was cut short (memory, depth).
search() {
  local dir="$work/$1"
  (cd "$dir" && ./pan $2 >pan.log 2>&1) || true
  errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.log" | tail -1)
  [ -n "$errors" ] || errors=unknown
  complete=1
  if grep -qE 'out of memory|reached -DMEMLIM|max search depth too small' "$dir/pan.log"; then complete=0; fi
  local states seconds
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.log" | head -1)
  seconds=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$dir/pan.log" | head -1)
  printf '%-28s %12s states  errors: %s  %ss\n' "$1" "${states:-?}" "$errors" "${seconds:-?}"
}

failed=0

# expect_pass NAME: the search completed with no error.
expect_pass() {
  if [ "$errors" != 0 ] || [ "$complete" != 1 ]; then
    echo "FAIL: $1 (errors: $errors, complete: $complete):"
    grep -E 'violated|acceptance cycle|invalid end state|out of memory|MEMLIM|depth too small' "$work/$1/pan.log" | head -5
    failed=1
  fi
}

# expect_caught NAME: the search found an error.
expect_caught() {
  if [ "$errors" = unknown ] || [ "$errors" = 0 ]; then
    echo "FAIL: mutant $1 was not caught: the properties cannot tell it from the protocol"
    failed=1
  else
    echo "  caught: $(grep -m1 -E 'violated|acceptance cycle' "$work/$1/pan.log" | sed 's/^pan:[0-9]*: *//')"
  fi
}

echo "spin $(spin -V | sed -n 's/^Spin Version \([^ ]*\).*/\1/p'): $(basename "$model")"

build safety "$safety_bounds" "-DSAFETY -DNOCLAIM"
search safety ""
expect_pass safety

build progress "$progress_bounds" "-DNFAIR=3"
search progress "-a -f -N progress"
expect_pass progress

for mutant in MUTANT_NO_FENCE MUTANT_EARLY_RELEASE MUTANT_SHORT_QUORUM MUTANT_DEAD_LEAVES_FENCE; do
  build "$mutant" "-DMAXE=1 -D$mutant" "-DSAFETY -DNOCLAIM"
  search "$mutant" ""
  expect_caught "$mutant"
done
build MUTANT_KEEP_QUARANTINE "-DMAXE=1 -DMUTANT_KEEP_QUARANTINE" "-DNFAIR=3"
search MUTANT_KEEP_QUARANTINE "-a -f -N progress"
expect_caught MUTANT_KEEP_QUARANTINE

exit $failed
