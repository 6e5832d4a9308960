#!/usr/bin/env bash
# Builds pgmedic as it is shipped: one static binary (glibc linked in, the
# pure-Go resolver and user lookup), stripped of its symbol table, with the
# version and commit it was built from. A static binary starts without the
# dynamic loader resolving libc, which is most of what a short command
# (explain of a small plan) spends before its own work.
#
# usage: scripts/build.sh [OUT]   (default ./pgmedic)
# VERSION and COMMIT, when set, replace what git says; CC and GOARCH
# cross-compile (scripts/package.sh builds arm64 so).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-pgmedic}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
  -ldflags "-s -w -linkmode external -extldflags -static -X github.com/pgmedic/pgmedic/internal/cli.Version=${version} -X github.com/pgmedic/pgmedic/internal/cli.Commit=${commit}" \
  -o "$out" ./cmd/pgmedic
