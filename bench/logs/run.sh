#!/usr/bin/env bash
# Runs pgmedic logs and pgBadger (Debian package pgbadger) on the same
# generated log and prints throughput, wall time and peak RSS of each, and
# the ratio. usage: bench/logs/run.sh [MB] [pgmedic] (default 200; with
# "pgmedic", pgBadger is not run: for pgmedic's peak memory on a log of
# several GB, where pgBadger would take hours)
set -euo pipefail
cd "$(dirname "$0")/../.."
mb=${1:-200}
dir=$(mktemp -d /tmp/pgmedic-logbench.XXXX)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/pgmedic" ./cmd/pgmedic
python3 bench/logs/gen.py "$mb" > "$dir/postgresql.log"
size=$(stat -c %s "$dir/postgresql.log")
measure() { # name, command...
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$dir/time" "$@" >/dev/null 2>"$dir/err" || { echo "$name failed: $(tail -3 "$dir/err")"; return 1; }
  read -r secs kb < "$dir/time"
  printf '%-24s %7.2f s  %7.1f MB/s  peak RSS %6.1f MB\n' "$name" "$secs" "$(echo "$size / 1048576 / $secs" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
  echo "$secs" > "$dir/$name.secs"
}
echo "log: $(echo "$size / 1048576" | bc) MB, $(wc -l < "$dir/postgresql.log") lines, $(nproc) cores"
# pgmedic takes a second or two, where a moment of load on a shared machine
# shows: the median of five runs is its figure (pgBadger's minute is not
# moved by such moments).
for i in 1 2 3 4 5; do
  measure "pgmedic-run$i" "$dir/pgmedic" logs --format json --prefix '%m [%p] %q%u@%d ' "$dir/postgresql.log" >/dev/null
done
sort -n "$dir"/pgmedic-run*.secs | sed -n 3p > "$dir/pgmedic.secs"
printf '%-24s %7.2f s  %7.1f MB/s  (median of 5 runs: %s)\n' pgmedic "$(cat "$dir/pgmedic.secs")" \
  "$(echo "$size / 1048576 / $(cat "$dir/pgmedic.secs")" | bc -l)" "$(cat "$dir"/pgmedic-run*.secs | tr '\n' ' ')"
measure pgmedic-peak "$dir/pgmedic" logs --format json --prefix '%m [%p] %q%u@%d ' "$dir/postgresql.log"
[ "${2:-}" = pgmedic ] && exit 0
measure pgbadger-j1 pgbadger -j 1 --pid-dir "$dir" --prefix '%m [%p] %q%u@%d ' -o "$dir/out.json" -x json "$dir/postgresql.log"
measure pgbadger-jN pgbadger -j "$(nproc)" --pid-dir "$dir" --prefix '%m [%p] %q%u@%d ' -o "$dir/outN.json" -x json "$dir/postgresql.log"
echo "ratio (pgBadger -j 1 / pgmedic): $(echo "$(cat "$dir/pgbadger-j1.secs") / $(cat "$dir/pgmedic.secs")" | bc -l | cut -c1-5)x"
echo "ratio (pgBadger -j $(nproc) / pgmedic): $(echo "$(cat "$dir/pgbadger-jN.secs") / $(cat "$dir/pgmedic.secs")" | bc -l | cut -c1-5)x"
