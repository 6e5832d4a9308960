#!/usr/bin/env bash
# Benchmark: `pgmedic check` on a database with many relations and many
# statements. Builds a lab cluster, creates TABLES tables (primary key, two
# secondary indexes, a text column with its TOAST table), runs STATEMENTS
# distinct statements so pg_stat_statements holds them, then runs check and
# reports wall time, peak RSS, and pgmedic's own server time (its tagged
# statements in pg_stat_statements: execution plus planning).
#
#   bash bench/catalog/run.sh [TABLES] [STATEMENTS]    # default 10000 5000
#
# Needs GNU time (Debian package `time`) and the lab's PostgreSQL.
set -euo pipefail
tables=${1:-10000}
statements=${2:-5000}
cd "$(dirname "$0")/../.."
source scripts/lab.sh
db=${dsn%/postgres*}/bench?sslmode=disable
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
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
rels=$(psql "$db" -Atc "SELECT count(*) FROM pg_class")
idx=$(psql "$db" -Atc "SELECT count(*) FROM pg_index")
nstat=$(psql "$db" -Atc "SELECT count(*) FROM pg_stat_statements WHERE query NOT LIKE '/* pgmedic */%'")
psql "$db" -c "SELECT pg_stat_statements_reset(0, 0, 0)" -o /dev/null 2>/dev/null || true
/usr/bin/time -f "%e %M" -o "$dir/time.txt" "$dir/pgmedic" check "$db" --format json --out "$dir/report.json" --min-severity info || true
read -r wall rss < <(tail -n1 "$dir/time.txt")
own=$(psql "$db" -Atc "SELECT round(sum(total_exec_time + total_plan_time)::numeric / 1000, 2) FROM pg_stat_statements WHERE query LIKE '/* pgmedic */%'")
top=$(psql "$db" -Atc "SELECT round((total_exec_time + total_plan_time)::numeric / 1000, 2) || ' s  ' || left(regexp_replace(query, '\s+', ' ', 'g'), 70) FROM pg_stat_statements WHERE query LIKE '/* pgmedic */%' ORDER BY total_exec_time + total_plan_time DESC LIMIT 4")
skipped=$(python3 -c "import json,sys; d=json.load(open('$dir/report.json')); print('; '.join(s['rule']+': '+s['reason'][:100] for s in d['skipped']) or 'none')")
cat <<OUT
machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(psql "$db" -Atc 'SHOW server_version')
database: $tables tables, $rels relations, $idx indexes, $nstat statements (setup ${setup}s)
pgmedic check: wall ${wall} s, peak RSS $((rss / 1024)) MB, own server time ${own} s
pgmedic's most expensive statements:
$top
skipped: $skipped
OUT
