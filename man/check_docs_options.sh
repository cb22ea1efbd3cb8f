#!/usr/bin/env bash
# The markdown pages name every option the man pages list: docs/shim.md each shim variable,
# docs/daemon.md each configuration key, as `code`. The man pages are written from the options
# table; this keeps the hand-written tables from missing a row added to it.
# Usage: check_docs_options.sh FILL_MAN_PAGE DOCS_DIR
set -euo pipefail
filler=$1
docs=$2
missing=0
check() {  # check PAGE STYLE SCOPE
  local name
  for name in $("$filler" --names "$2" "$3"); do
    if ! grep -qF "\`$name\`" "$docs/$1"; then
      echo "check_docs_options: docs/$1 does not name \`$name\` (a row of base/options.cc): add it to its table" >&2
      missing=1
    fi
  done
}
check shim.md environment shim
check daemon.md config-file daemon
[ $missing -eq 0 ] && echo "check_docs_options: docs/shim.md and docs/daemon.md name every option"
exit $missing
