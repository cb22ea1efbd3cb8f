#!/usr/bin/env bash
# `DESTDIR=... cmake --install BUILD` into a temporary directory: every file expected is there,
# nothing else is, programs are executable and the units name the installed programs.
# Usage: check_install.sh BUILD_DIR EXPECTED_LIST
set -euo pipefail
build=$1
expected=$2
root=$(mktemp -d /tmp/hugepin-install-XXXXXX)
trap 'rm -rf "$root"' EXIT

DESTDIR=$root cmake --install "$build" >/dev/null
actual=$(cd "$root" && find . -type f -o -type l | sed 's|^\.||' | sort)
if ! diff <(sort "$expected") <(echo "$actual"); then
  echo "check_install: the installed files (>) differ from the expected ones (<)" >&2
  exit 1
fi
while read -r file; do
  case "$file" in
    */bin/*|*/sbin/*)
      [ -x "$root$file" ] || { echo "check_install: $file is not executable" >&2; exit 1; }
      "$root$file" --help >/dev/null || { echo "check_install: $file --help failed" >&2; exit 1; } ;;
    *.service)
      exec_path=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$root$file")
      grep -qxF "$exec_path" "$expected" || { echo "check_install: $file runs $exec_path, which is not installed" >&2; exit 1; } ;;
  esac
done < "$expected"
echo "check_install: $(wc -l < "$expected") files in place"
