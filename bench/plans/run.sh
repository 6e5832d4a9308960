#!/usr/bin/env bash
# Runs `pgmedic explain` (the whole process: start, read, parse, rules,
# report), pgplan's `analyze` (the Go peer: the same, whole process) and
# pev2's plan parser (npm pev2, its plan service under Node: parsing only,
# so pev2 is favoured) on the same plans, and prints each one's time and
# pgmedic's ratio to it.
#
# usage: bench/plans/run.sh [RUNS] (default 21; the median is reported)
#   PGPLAN     pgplan's binary (default: pgplan on PATH). Build it from its
#              public source, github.com/JacobArthurs/pgplan (commit 31dbd16
#              was measured), with `go build`; without it its column is empty.
#   FORMAT     json compares both tools' JSON output (explain --format json,
#              pgplan analyze -f json); default text.
#   PEV2=0     skips pev2 (it takes minutes on the deep plan).
#
# pgplan reads JSON only: for a TEXT plan it is given the same plan's JSON.
# Runs alternate between the tools (timeit.py), so a moment when the
# machine is busy costs every tool alike.
set -euo pipefail
cd "$(dirname "$0")"
runs=${1:-21}
dir=$(mktemp -d /tmp/pgmedic-planbench.XXXX)
trap 'rm -rf "$dir"' EXIT
# pgmedic as it is shipped (static; scripts/build.sh).
bash ../../scripts/build.sh "$dir/pgmedic.built"
pgplan=${PGPLAN:-$(command -v pgplan || true)}
# Both binaries are copied into the same directory the same way: a file
# fresh from the linker can sit in the page cache differently from one
# copied (here a just-linked pgmedic ran 9% faster and with 8 MB more
# resident than a copy of the same bytes), which would favour one tool.
cp "$dir/pgmedic.built" "$dir/pgmedic"
if [ -n "$pgplan" ]; then
  cp "$pgplan" "$dir/pgplan"
  pgplan="$dir/pgplan"
fi
pev2=${PEV2:-1}
pgmedic_format="--format ${FORMAT:-text}"
pgplan_format="-f ${FORMAT:-text}"
if [ "$pev2" = 1 ] && [ ! -d node_modules/pev2 ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
python3 gen.py "$dir"

ms() { awk -v us="$1" 'BEGIN {printf "%.1f ms", us/1000}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a/b}'; }

echo "machine: $(nproc) cores; $(go version | cut -d' ' -f3); median of $runs runs each; output ${FORMAT:-text}"
[ -n "$pgplan" ] && echo "pgplan: $pgplan" || echo "pgplan: not found (set PGPLAN)"
printf '%-10s %8s %6s %12s %12s %9s %16s %8s\n' plan size nodes pgmedic pgplan "pgplan/pgmedic" "pev2 (parse)" "pev2/pgmedic"
for f in small.txt small.json wide.txt wide.json deep.txt deep.json; do
  json="$dir/${f%.*}.json"
  # Medians in microseconds, the tools taking turns (timeit.py).
  if [ -n "$pgplan" ]; then
    mapfile -t m < <(python3 timeit.py "$runs" "$dir/pgmedic explain $pgmedic_format $dir/$f" "$pgplan analyze $pgplan_format $json")
  else
    mapfile -t m < <(python3 timeit.py "$runs" "$dir/pgmedic explain $pgmedic_format $dir/$f")
  fi
  a=${m[0]}
  nodes=$(grep -c '"Node Type"' "$json")
  pp="-"; pr="-"
  if [ -n "$pgplan" ]; then
    pp=$(ms "${m[1]}"); pr=$(ratio "${m[1]}" "$a")
  fi
  pv="-"; vr="-"
  if [ "$pev2" = 1 ]; then
    if line=$(timeout 300 node pev2-parse.mjs "$dir/$f"); then
      pv="$(cut -f2 <<<"$line") ms"; vr=$(ratio "$(cut -f2 <<<"$line")" "$(awk -v a="$a" 'BEGIN {print a/1000}')")
    else
      pv=">300000 ms"
    fi
  fi
  printf '%-10s %7sK %6s %12s %12s %9s %16s %8s\n' "$f" "$(( $(stat -c %s "$dir/$f") / 1024 ))" "$nodes" "$(ms "$a")" "$pp" "$pr" "$pv" "$vr"
done
# Start-up alone: the shortest paths, where nothing but starting the
# process is timed.
if [ -n "$pgplan" ]; then
  for a in --version --help; do
    mapfile -t m < <(python3 timeit.py "$runs" "$dir/pgmedic $a" "$pgplan $a")
    printf '%-10s %8s %6s %12s %12s %9s\n' "$a" - - "$(ms "${m[0]}")" "$(ms "${m[1]}")" "$(ratio "${m[1]}" "${m[0]}")"
  done
fi
