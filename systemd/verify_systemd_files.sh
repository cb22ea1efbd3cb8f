#!/usr/bin/env bash
# systemd-analyze verify on every unit hugepin installs. The units name installed paths: they are
# installed into a temporary DESTDIR and verified with each installed file's path pointing there,
# so that the programs they run exist (other paths, /bin/kill, systemd-tmpfiles, are the host's).
# Then the installed sysusers.d and tmpfiles.d entries are applied to an empty root (systemd-sysusers
# and systemd-tmpfiles --root), and the directories they make are checked. Needs no running systemd.
# Usage: verify_systemd_files.sh BUILD_DIR UNIT_DIR SYSUSERS_DIR TMPFILES_DIR
set -euo pipefail
build=$1
unit_dir=$2
sysusers_dir=$3
tmpfiles_dir=$4
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: needs systemd-analyze (Debian package systemd; .ci/install-deps installs it)"
  exit 77
fi
root=$(mktemp -d /tmp/hugepin-units-XXXXXX)
trap 'rm -rf "$root"' EXIT
DESTDIR=$root/install cmake --install "$build" >/dev/null
mkdir -p "$root/units"
rewrite=()
while read -r file; do
  rewrite+=(-e "s|$file\b|$root/install$file|g")
done < <(cd "$root/install" && find . -type f | sed 's|^\.||')
units=()
for unit in "$root/install$unit_dir"/*; do
  name=$(basename "$unit")
  sed "${rewrite[@]}" "$unit" > "$root/units/$name"
  units+=("$root/units/$name")
done
[ ${#units[@]} -ge 3 ] || { echo "verify_systemd_files: expected at least 3 units in $unit_dir, found ${#units[@]}" >&2; exit 1; }
# verify prints problems and fails on them; --man=no: the man pages are not installed on this host.
output=$(cd "$root/units" && systemd-analyze verify --man=no "${units[@]}" 2>&1) || { echo "$output" >&2; exit 1; }
if [ -n "$output" ]; then
  echo "$output" >&2
  echo "verify_systemd_files: systemd-analyze verify reported the above" >&2
  exit 1
fi
echo "verify_systemd_files: ${#units[@]} units verified: $(cd "$root/units" && echo *)"

# sysusers.d, then tmpfiles.d (which names the user), into an empty root.
mkdir -p "$root/sysroot/etc"
systemd-sysusers --root="$root/sysroot" "$root/install$sysusers_dir/hugepin.conf" >/dev/null 2>&1 ||
  { echo "verify_systemd_files: systemd-sysusers refused $sysusers_dir/hugepin.conf" >&2; exit 1; }
grep -q '^hugepin:' "$root/sysroot/etc/passwd" || { echo "verify_systemd_files: no user hugepin was made" >&2; exit 1; }
systemd-tmpfiles --root="$root/sysroot" --create "$root/install$tmpfiles_dir/hugepin.conf" ||
  { echo "verify_systemd_files: systemd-tmpfiles refused $tmpfiles_dir/hugepin.conf" >&2; exit 1; }
uid=$(sed -n 's/^hugepin:x:\([0-9]*\):.*/\1/p' "$root/sysroot/etc/passwd")
gid=$(sed -n 's/^hugepin:x:\([0-9]*\):.*/\1/p' "$root/sysroot/etc/group")
# The arena directories: root and the group hugepin only may create arenas (nobody else can plant
# a file where hugepin looks for one); sticky.
for expected in "1770 0 $gid /dev/hugepages/hugepin" "1770 0 $gid /dev/hugepages1G/hugepin" \
                "1770 0 $gid /dev/shm/hugepin" "750 $uid $gid /run/hugepin"; do
  read -r mode owner group path <<< "$expected"
  actual=$(stat -c '%a %u %g' "$root/sysroot$path" 2>/dev/null || echo missing)
  [ "$actual" = "$mode $owner $group" ] ||
    { echo "verify_systemd_files: $path is '$actual', expected '$mode $owner $group'" >&2; exit 1; }
done
echo "verify_systemd_files: sysusers.d and tmpfiles.d entries applied"
