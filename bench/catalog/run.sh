#!/usr/bin/env bash
# Benchmark: `pgmedic check` on a database with many relations and many
# statements. Builds a lab cluster, creates TABLES tables (primary key, two
# secondary indexes, a text column with its TOAST table), runs STATEMENTS
# distinct statements so pg_stat_statements holds them, then runs check and
# reports wall time, peak RSS, and the server's CPU time meanwhile (for a
# server on this machine).
#
#   bash bench/catalog/run.sh [TABLES] [STATEMENTS]    # default 10000 5000
#
# DB=postgres://... runs check on a database this script built earlier
# (kept with KEEP=1, which leaves the cluster up and prints its DSN)
# instead of building one: the million-relation setup takes minutes.
# LOAD=N runs N CPU-burning loops beside check (a busy machine).
# PGMEDIC=path runs that binary's check instead of this tree's (a build of
# an earlier commit, for before and after on the same database and day).
#
# Needs GNU time (Debian package `time`) and the lab's PostgreSQL.
set -euo pipefail
tables=${1:-10000}
statements=${2:-5000}
cd "$(dirname "$0")/../.."
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
if [ -n "${DB:-}" ]; then
  dir=$(mktemp -d /tmp/pgmedic-script.XXXX)
  trap 'rm -rf "$dir"' EXIT
  go build -o "$dir/pgmedic" ./cmd/pgmedic
  [ -n "${PGMEDIC:-}" ] && cp "$PGMEDIC" "$dir/pgmedic"
  db=$DB
  setup=0
else
source scripts/lab.sh
# lab.sh's psql names the lab's postgres database; this one takes $db.
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
if [ "${KEEP:-}" = 1 ]; then
  trap 'rm -f "$dir/pgmedic"' EXIT
fi
db=${dsn%/postgres*}/bench?sslmode=disable
psql "$dsn" -c "ALTER SYSTEM SET pg_stat_statements.max = $((statements + 1000))" -c "CREATE DATABASE bench"
# pg_stat_statements.max takes effect at a restart; the server runs as the
# postgres account when this runs as root.
pgctl=("$(pg_config --bindir)/pg_ctl" -D "$dir/lab/data" -l "$dir/lab/server.log" -w restart)
if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "${pgctl[@]}" >/dev/null; else "${pgctl[@]}" >/dev/null; fi
start=$(date +%s)
psql "$db" <<SQL
CREATE EXTENSION pg_stat_statements;
DO \$\$
BEGIN
  FOR i IN 1..$tables LOOP
    EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY KEY, a int, b text, c timestamptz)', i);
    EXECUTE format('CREATE INDEX t%s_a ON t%s (a)', i, i);
    EXECUTE format('CREATE INDEX t%s_c ON t%s (c)', i, i);
    IF i % 500 = 0 THEN COMMIT; END IF;
  END LOOP;
END \$\$;
-- A few tables with rows, so statistics and plans are not all empty.
INSERT INTO t1 SELECT g, g % 100, md5(g::text), now() FROM generate_series(1, 100000) g;
INSERT INTO t2 SELECT g, g % 100, md5(g::text), now() FROM generate_series(1, 100000) g;
VACUUM ANALYZE t1, t2;
SELECT pg_stat_statements_reset() \\g /dev/null
SQL
# One distinct statement per table (each a different queryid), run once.
awk -v n="$statements" -v t="$tables" 'BEGIN { for (i = 1; i <= n; i++) printf "SELECT id, b FROM t%d WHERE a = %d AND c > now() - interval '\''1 day'\'';\n", 1 + (i - 1) % t, i }' >"$dir/stmts.sql"
psql "$db" -o /dev/null -f "$dir/stmts.sql"
# The catalogs as autovacuum leaves them on a database that did not just
# create a million relations: vacuumed (hint bits set, visibility map
# built) and analysed. Left to autovacuum, that work would run during the
# first check and be measured with it.
psql "$db" -c "VACUUM ANALYZE pg_catalog.pg_class, pg_catalog.pg_index, pg_catalog.pg_attribute, pg_catalog.pg_type, pg_catalog.pg_depend, pg_catalog.pg_constraint, pg_catalog.pg_statistic"
setup=$(( $(date +%s) - start ))
[ "${KEEP:-}" = 1 ] && echo "kept: DB='$db' (pgmedic lab down --dir $dir/lab when done)"
fi
if [ -n "${DB:-}" ]; then
  # check's first run left pg_stat_statements as it was; run the
  # statements again so every run sees the same number.
  awk -v n="$statements" -v t="$tables" 'BEGIN { for (i = 1; i <= n; i++) printf "SELECT id, b FROM t%d WHERE a = %d AND c > now() - interval '\''1 day'\'';\n", 1 + (i - 1) % t, i }' >"$dir/stmts.sql"
  psql "$db" -o /dev/null -f "$dir/stmts.sql"
fi
rels=$(psql "$db" -Atc "SELECT count(*) FROM pg_class")
idx=$(psql "$db" -Atc "SELECT count(*) FROM pg_index")
nstat=$(psql "$db" -Atc "SELECT count(*) FROM pg_stat_statements WHERE query NOT LIKE '/* pgmedic */%'")
# The server's CPU time during check: every backend's, pgmedic's and
# autovacuum's, as the postmaster counts its children that have exited
# (pgmedic's backend exits with it). pgmedic keeps its own statements out
# of pg_stat_statements, so that cannot be asked.
pmpid=$(head -n1 "$(psql "$db" -Atc 'SHOW data_directory')/postmaster.pid" 2>/dev/null || true)
servercpu() { [ -n "$pmpid" ] && awk '{printf "%.2f", ($16 + $17) / 100}' "/proc/$pmpid/stat" || echo 0; }
cpu0=$(servercpu)
burners=()
for _ in $(seq 1 "${LOAD:-0}"); do (while :; do :; done) & burners+=($!); done
/usr/bin/time -f "%e %M" -o "$dir/time.txt" "$dir/pgmedic" check "$db" --format json --out "$dir/report.json" --min-severity info || true
for p in "${burners[@]}"; do kill "$p"; done
read -r wall rss < <(tail -n1 "$dir/time.txt")
sleep 1
cpu=$(awk -v a="$cpu0" -v b="$(servercpu)" 'BEGIN {printf "%.2f", b - a}')
skipped=$(python3 -c "import json,sys; d=json.load(open('$dir/report.json')); print('; '.join(s['rule']+': '+s['reason'][:100] for s in d['skipped']) or 'none')")
cat <<OUT
machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(psql "$db" -Atc 'SHOW server_version'); ${LOAD:-0} CPU-burning loops beside check
database: $tables tables, $rels relations, $idx indexes, $nstat statements (setup ${setup}s)
pgmedic check: wall ${wall} s, peak RSS $((rss / 1024)) MB, the server's CPU meanwhile ${cpu} s
skipped: $skipped
OUT
