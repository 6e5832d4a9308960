#!/usr/bin/env bash
# Opens the largest report pgmedic writes (a check of 5,000 statements, 50
# plans, one of them a 2,001-node Append, 100 activity samples of 40
# sessions) in headless Chromium, offline, and prints the page's size and
# the time from navigation until its script has drawn the tables and
# charts (BenchmarkChromiumLoad in internal/report). Needs chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "machine: $(nproc) cores, $(chromium --version 2>/dev/null | tail -1)"
go test ./internal/report -run '^$' -bench ChromiumLoad -benchtime "${1:-5}x" | grep -E '^Benchmark'
