#!/usr/bin/env bash
# Checks the release files as a user gets them (CI runs it after the
# tests): scripts/package.sh builds them, then
#   - the arm64 binary runs under qemu-user and says what the amd64 one
#     says (its version, a plan explained, a log summarised: pg_query's C
#     and Go's runtime both work on arm64);
#   - the amd64 .deb installs with dpkg -i, /usr/bin/pgmedic prints its
#     version and commit, the man pages and completions are where man and
#     the shells look, and `pgmedic demo` passes from a directory outside
#     the source tree, on scenarios that need every kind of thing the binary
#     carries (Python and Node clients, PgBouncer, a standby, a second
#     major, a rehearsal);
#   - dpkg -r removes it and leaves none of its files, and no process of
#     the demo's lab runs on.
# It installs a package on this machine, so it runs as root (or with sudo)
# and refuses when a pgmedic package is installed already.
#
# usage: scripts/package-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)

sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
if dpkg-query -W -f '${Status}' pgmedic 2>/dev/null | grep -q ' installed$'; then
  echo "package-check: a pgmedic package is installed here already; remove it first (dpkg -r pgmedic)" >&2
  exit 2
fi
for tool in qemu-aarch64-static dpkg-deb; do
  command -v $tool >/dev/null || { echo "package-check: $tool is missing: run scripts/install-deps.sh" >&2; exit 2; }
done

work=$(mktemp -d)
chmod 755 "$work"
cleanup() {
  if dpkg-query -W -f '${Status}' pgmedic 2>/dev/null | grep -q ' installed$'; then
    "${sudo[@]}" dpkg -r pgmedic >/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "package-check: FAILED: $*" >&2; exit 1; }

bash scripts/package.sh "$work/dist"
deb=$(ls "$work"/dist/pgmedic_*_amd64.deb)
version=$(dpkg-deb -f "$deb" Version)
commit=$(git rev-parse --short=12 HEAD)
want="pgmedic version $version (commit $commit)"

# arm64, under qemu-user, against amd64.
mkdir -p "$work/amd64" "$work/arm64"
for arch in amd64 arm64; do
  tar -xzf "$work"/dist/pgmedic_*_linux_$arch.tar.gz -C "$work/$arch" --strip-components=1
  cmp -s "$work/$arch/LICENSE" LICENSE || fail "the $arch tarball does not carry LICENSE"
  grep -q "Apache License, Version 2.0" "$work/$arch/NOTICE" || fail "the $arch tarball's NOTICE does not name the licence"
done
run_arm64() { qemu-aarch64-static "$work/arm64/pgmedic" "$@"; }
[ "$(run_arm64 --version)" = "$want" ] || fail "arm64 --version says '$(run_arm64 --version)', want '$want'"
for cmd in "explain internal/plan/testdata/pg15_jit_analyze.json" "logs internal/cli/testdata/planted.log"; do
  read -r -a args <<<"$cmd"
  # explain exits 1 on a plan with findings: compare outputs and codes.
  a=$("$work/amd64/pgmedic" "${args[@]}"; echo "exit $?") || true
  b=$(run_arm64 "${args[@]}"; echo "exit $?") || true
  [ "$a" = "$b" ] || fail "pgmedic $cmd: arm64 and amd64 differ:
$(diff <(echo "$a") <(echo "$b") | head -20)"
done
echo "package-check: arm64 binary runs under qemu and agrees with amd64 ($(file -b "$work/arm64/pgmedic" | cut -d, -f1-2))"

# The .deb, installed, run from elsewhere, removed.
"${sudo[@]}" dpkg -i "$deb" >/dev/null
[ "$(command -v pgmedic)" = /usr/bin/pgmedic ] || fail "pgmedic on PATH is $(command -v pgmedic), not /usr/bin/pgmedic"
[ "$(/usr/bin/pgmedic --version)" = "$want" ] || fail "/usr/bin/pgmedic --version says '$(/usr/bin/pgmedic --version)', want '$want'"
for f in /usr/share/man/man1/pgmedic.1.gz /usr/share/man/man1/pgmedic-rehearse-upgrade.1.gz \
         /usr/share/bash-completion/completions/pgmedic /usr/share/zsh/vendor-completions/_pgmedic \
         /usr/share/fish/vendor_completions.d/pgmedic.fish /usr/share/doc/pgmedic/copyright; do
  [ -s "$f" ] || fail "$f is not installed"
done
copyright=$(cat /usr/share/doc/pgmedic/copyright)
grep -q "Apache License, Version 2.0" <<<"$copyright" || fail "the .deb's copyright file does not name the licence"
# (Read whole before grep: grep -q would stop reading early, and pipefail
# would take the writer's SIGPIPE for a failure.)
page=$(zcat /usr/share/man/man1/pgmedic-check.1.gz)
grep -q '^pgmedic-check - ' <<<"$page" || fail "pgmedic-check.1 does not name its command"
# What bash's completion asks the installed binary.
offered=$(/usr/bin/pgmedic __complete rehearse "" 2>/dev/null)
grep -q '^upgrade' <<<"$offered" || fail "pgmedic __complete does not offer rehearse's subcommands: $offered"

away=$(mktemp -d)
chmod 755 "$away"
scenarios=asyncpg-introspection,client-param-types,blocked-event-loop,pool-saturation,replica-report-stalls,upgrade-quiet,migration-rehearsal,jit-oltp
echo "package-check: /usr/bin/pgmedic demo --scenarios $scenarios, in $away"
# Lab servers already running (a `lab up` cluster, or one a killed test
# left behind) are not the demo's: only processes that appear during it
# are held against it.
labs_before=$(pgrep -f 'pgmedic-lab-' | sort || true)
start=$(date +%s)
if ! (cd "$away" && /usr/bin/pgmedic demo --scenarios "$scenarios" > demo.txt 2> demo.err); then
  tail -30 "$away/demo.txt" >&2
  cat "$away/demo.err" >&2
  fail "pgmedic demo from /usr/bin failed"
fi
grep -q "^jit-oltp .* ok" "$away/demo.txt" || fail "the demo's summary does not list jit-oltp as ok"
[ -s "$away/pgmedic-demo.html" ] || fail "the demo wrote no pgmedic-demo.html in its directory"
echo "package-check: the demo passed from /usr/bin in $(( $(date +%s) - start )) s"
rm -rf "$away"

files=$(dpkg-query -L pgmedic | grep -v '^/\.$')
"${sudo[@]}" dpkg -r pgmedic >/dev/null
status=$(dpkg-query -W -f '${Status}' pgmedic 2>/dev/null || true)
case $status in ""|"unknown ok not-installed"|"deinstall ok not-installed") ;; *) fail "after dpkg -r, dpkg says: $status" ;; esac
left=()
for f in $files; do
  # Directories other packages share (/usr/share/man/man1) stay.
  [ -e "$f" ] && [ ! -d "$f" ] && left+=("$f")
done
[ ${#left[@]} -eq 0 ] || fail "dpkg -r left: ${left[*]}"
[ -d /usr/share/doc/pgmedic ] && fail "dpkg -r left /usr/share/doc/pgmedic"
new_labs=$(comm -13 <(echo "$labs_before") <(pgrep -f 'pgmedic-lab-' | sort || true) | grep . || true)
if [ -n "$new_labs" ]; then
  fail "a process of the demo's lab still runs: $(ps -o pid=,args= -p "$(echo $new_labs | tr ' ' ,)" | head -3)"
fi
if [ -n "$labs_before" ]; then
  echo "package-check: lab servers that ran before the demo, not its own, left alone: $(echo $labs_before) (pgmedic lab down --leftovers removes a killed run's)"
fi
cd "$src"
echo "package-check: pgmedic $version installed, ran the demo from /usr/bin, and was removed without a trace"
