#!/usr/bin/env bash
# The exported symbols of libhugepin.so are exactly the C ABI: `nm -D` of the library, the list in
# libhugepin.map and the functions hugepin.h declares must be the same three lists.
# Usage: check_symbols.sh LIBRARY MAP HEADER
set -euo pipefail
lib=$1 map=$2 header=$3

# Defined dynamic symbols, version suffix dropped; 'A' is the version node itself (HUGEPIN_0).
exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//' | sort -u)
listed=$(sed -n 's/^ *\(hugepin_[a-z0-9_]*\);$/\1/p' "$map" | sort -u)
declared=$(grep -v '^#' "$header" | grep -o 'HUGEPIN_API [^(]*(' | sed 's/.*[ *]\(hugepin_[a-z0-9_]*\)($/\1/' | sort -u)

status=0
if ! diff <(echo "$declared") <(echo "$listed") >/dev/null; then
  echo "check_symbols: hugepin.h (<) and libhugepin.map (>) differ:" >&2
  diff <(echo "$declared") <(echo "$listed") >&2 || true
  status=1
fi
if ! diff <(echo "$listed") <(echo "$exported") >/dev/null; then
  echo "check_symbols: libhugepin.map (<) and nm -D $lib (>) differ:" >&2
  diff <(echo "$listed") <(echo "$exported") >&2 || true
  status=1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case "$soname" in
  libhugepin.so.[0-9]*) ;;
  *) echo "check_symbols: SONAME is '$soname', expected libhugepin.so.<major>" >&2; status=1 ;;
esac
[ $status -eq 0 ] && echo "check_symbols: $(echo "$exported" | wc -l) symbols exported, all of them the C ABI; SONAME $soname"
exit $status
