#!/usr/bin/env bash
# Builds pgmedic as it is shipped: one static binary (a C library linked
# in for pg_query's C, the pure-Go resolver and user lookup), stripped of
# its symbol table, with the version and commit it was built from. A static
# binary starts without the dynamic loader resolving libc, which is most of
# what a short command (explain of a small plan) spends before its own
# work.
#
# On amd64 the C library is musl (Debian's musl-tools, MIT licence):
# Go's cgo start-up through musl (threads, each signal handler, the main
# thread's stack) took 0.2-0.3 ms less than through a static glibc, a
# twentieth of explain of a small plan, and musl is made to be linked
# statically. A cross build (CC and GOARCH set: scripts/package.sh's arm64)
# links the cross toolchain's glibc.
#
# usage: scripts/build.sh [OUT]   (default ./pgmedic)
# VERSION and COMMIT, when set, replace what git says; CC and GOARCH
# cross-compile (scripts/package.sh builds arm64 so).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-pgmedic}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${CC:-}" ] && [ "$(go env GOARCH)" = amd64 ]; then
  command -v musl-gcc >/dev/null || { echo "build: musl-gcc is missing (Debian: apt-get install musl-tools, or run scripts/install-deps.sh)" >&2; exit 2; }
  export CC=musl-gcc
fi
CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
  -ldflags "-s -w -linkmode external -extldflags -static -X github.com/pgmedic/pgmedic/internal/cli.Version=${version} -X github.com/pgmedic/pgmedic/internal/cli.Commit=${commit}" \
  -o "$out" ./cmd/pgmedic
