#!/usr/bin/env bash
# Installs, on Debian 12, what pgmedic's demo and tests need and the
# machine does not have yet: PostgreSQL 15 with contrib and HypoPG, the
# real clients the lab drives (asyncpg, psycopg 3, PgBouncer, Node.js),
# pgBadger, Chromium, perf, gcc and jemalloc; for the packages and their
# checks, the arm64 cross compiler, qemu-user, shellcheck and Prometheus's
# binaries. Whatever is already there is left alone: a Node.js from
# NodeSource (which bundles npm and conflicts with Debian's npm package), a
# PostgreSQL from another repository, a perf built by hand. Run it as root, or as a user who may sudo. Safe to run
# again: the second time it installs nothing.
#
# usage: scripts/install-deps.sh [--check]   (--check lists what is missing)
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
pyhas() { /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }

need=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
[ -f /usr/share/postgresql/15/extension/pg_stat_statements.control ] || need+=(postgresql-contrib)
[ -f /usr/share/postgresql/15/extension/hypopg.control ] || need+=(postgresql-15-hypopg)
pyhas asyncpg || need+=(python3-asyncpg)
pyhas psycopg || need+=(python3-psycopg)
[ -x /usr/sbin/pgbouncer ] || have pgbouncer || need+=(pgbouncer)
# Node.js: Debian's nodejs comes without npm; NodeSource's bundles it and
# refuses Debian's npm package. Ask only for what is absent.
if ! have node; then
  need+=(nodejs npm)
elif ! have npm; then
  need+=(npm)
fi
have pgbadger || need+=(pgbadger)
have chromium || need+=(chromium)
have perf || need+=(linux-perf)
have gcc || need+=(gcc libc6-dev)
# scripts/build.sh links the shipped amd64 binary against musl.
have musl-gcc || need+=(musl-tools)
[ -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2)
# scripts/package.sh cross-compiles pg_query's C for arm64.
have aarch64-linux-gnu-gcc || need+=(gcc-aarch64-linux-gnu)
# actionlint runs shellcheck on the GitHub Action's scripts.
have shellcheck || need+=(shellcheck)
# scripts/package-check.sh runs the arm64 binary under qemu-user.
have qemu-aarch64-static || need+=(qemu-user-static)
# Prometheus and promtool test deploy/prometheus. Debian's package would
# start a server as a service; its binaries are unpacked instead, into
# pgmedic's cache, and nothing runs until a test starts one.
promdir=/var/cache/pgmedic/prometheus
prom=()
have promtool || [ -x $promdir/usr/bin/promtool ] || prom=(prometheus)

if [ "${1:-}" = --check ]; then
  missing=("${need[@]}" "${prom[@]}")
  [ ${#missing[@]} -eq 0 ] && echo "nothing missing" || echo "missing: ${missing[*]}"
  exit 0
fi
if [ ${#need[@]} -eq 0 ] && [ ${#prom[@]} -eq 0 ]; then
  echo "install-deps: everything pgmedic's demo and tests need is installed"
  exit 0
fi
if ! have apt-get; then
  echo "install-deps: no apt-get here (pgmedic's scripts know Debian 12); install these by other means: ${need[*]}" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  have sudo || { echo "install-deps: run as root, or install sudo, to install: ${need[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ ${#prom[@]} -gt 0 ]; then
  echo "install-deps: unpacking Debian's prometheus (prometheus, promtool) into $promdir"
  tmp=$(mktemp -d)
  chmod 755 "$tmp" # apt downloads as its own user
  (cd "$tmp" && apt-get download -qq prometheus)
  "${sudo[@]}" mkdir -p $promdir
  "${sudo[@]}" dpkg-deb -x "$tmp"/prometheus_*.deb $promdir
  rm -rf "$tmp"
fi
