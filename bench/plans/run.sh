#!/usr/bin/env bash
# Runs `pgmedic explain` (the whole process: read, parse, rules, report)
# and pev2's plan parser (npm pev2, its plan service under Node: parsing
# only, so pev2 is favoured) on the same large plans, in TEXT and JSON,
# and prints each one's time and the ratio.
# usage: bench/plans/run.sh [PEV2_TIMEOUT_SECONDS] (default 300)
set -euo pipefail
cd "$(dirname "$0")"
limit=${1:-300}
dir=$(mktemp -d /tmp/pgmedic-planbench.XXXX)
trap 'rm -rf "$dir"' EXIT
(cd ../.. && go build -o "$dir/pgmedic" ./cmd/pgmedic)
[ -d node_modules/pev2 ] || npm ci --no-audit --no-fund --loglevel=error
python3 gen.py "$dir"
echo "machine: $(nproc) cores, $(node --version), pev2 $(node -p 'require("./node_modules/pev2/package.json").version')"
printf '%-10s %9s %7s %16s %18s %9s\n' plan size nodes "pgmedic (whole)" "pev2 (parse only)" ratio
for f in wide.txt wide.json deep.txt deep.json; do
  # pgmedic: the median of 5 whole-process runs. Exit code 1 means
  # findings were reported, which these plans have.
  times=()
  for _ in 1 2 3 4 5; do
    t0=$(date +%s%N)
    "$dir/pgmedic" explain "$dir/$f" >"$dir/out" 2>&1 || [ $? -eq 1 ]
    times+=($(( ($(date +%s%N) - t0) / 1000 )))
  done
  us=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
  nodes=$(grep -c -- '-> \|^ \*\? *1 ' "$dir/out" || true)
  if line=$(timeout "$limit" node pev2-parse.mjs "$dir/$f"); then
    pev=$(cut -f2 <<<"$line"); nodes=$(cut -f3 <<<"$line")
    ratio=$(echo "$pev * 1000 / $us" | bc -l | cut -c1-6)x
    pev="$pev ms"
  else
    pev=">${limit}000 ms"; ratio=">$(echo "$limit * 1000000 / $us" | bc)x"
  fi
  printf '%-10s %8sK %7s %13.1f ms %18s %9s\n' "$f" "$(( $(stat -c %s "$dir/$f") / 1024 ))" "$nodes" "$(echo "$us / 1000" | bc -l)" "$pev" "$ratio"
done
