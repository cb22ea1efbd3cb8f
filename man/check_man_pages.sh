#!/usr/bin/env bash
# Renders each man page as `man -l PAGE` shows it, with every groff warning on (-ww), and fails when
# groff warns or a page renders without its NAME section. Skips (77) when neither man nor groff
# is installed (Debian: man-db, which brings groff-base).
# Usage: check_man_pages.sh PAGE...
set -euo pipefail
if command -v man >/dev/null; then
  render() { MANWIDTH=80 man --warnings=w -l "$1"; }
elif command -v groff >/dev/null; then
  render() { groff -man -Tutf8 -ww -t "$1"; }
else
  echo "check_man_pages: neither man nor groff is installed (apt-get install man-db): skipped"
  exit 77
fi
export LC_ALL=C.UTF-8
failed=0
for page in "$@"; do
  out=$(mktemp) err=$(mktemp)
  if ! render "$page" >"$out" 2>"$err"; then
    echo "check_man_pages: $page: the renderer failed" >&2; cat "$err" >&2; failed=1
  elif [ -s "$err" ]; then
    echo "check_man_pages: $page: warnings:" >&2; cat "$err" >&2; failed=1
  elif ! grep -q '^NAME' "$out"; then
    echo "check_man_pages: $page: no NAME section in what it renders" >&2; failed=1
  else
    echo "check_man_pages: $page: $(wc -l <"$out") lines, no warning"
  fi
  rm -f "$out" "$err"
done
exit $failed
