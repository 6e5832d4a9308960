# Sourced by the fixture and benchmark scripts: builds pgmedic, starts a lab
# cluster (PostgreSQL $PG when set: 13 to 18) that is removed when the
# script exits, and sets
#   dir  a scratch directory the postgres account can read
#   dsn  the lab's postgres database
# and a psql function with ON_ERROR_STOP against it (extra arguments, such
# as another -d, pass through).
dir=$(mktemp -d /tmp/pgmedic-script.XXXX)
chmod 755 "$dir"
go build -o "$dir/pgmedic" ./cmd/pgmedic
"$dir/pgmedic" lab up --pg "${PG:-0}" --dir "$dir/lab" >"$dir/up.txt"
trap '"$dir/pgmedic" lab down --dir "$dir/lab" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
dsn=$(tail -n1 "$dir/up.txt")
psql() { command psql "$dsn" -X -q -v ON_ERROR_STOP=1 "$@"; }

# log_everything DESTINATIONS LOGDIR AUTO_EXPLAIN_MS [PSQL -c ARGS...]: the
# lab server logs every statement, connection, lock wait, temporary file,
# checkpoint and autovacuum run, and auto_explain's plans of statements over
# AUTO_EXPLAIN_MS, to pg.log (and pg.csv, pg.json) in LOGDIR; then restarts.
log_everything() {
  local destinations=$1 logdir=$2 explain_ms=$3
  shift 3
  psql -c "ALTER SYSTEM SET logging_collector = on" \
       -c "ALTER SYSTEM SET log_destination = '$destinations'" \
       -c "ALTER SYSTEM SET log_directory = '$logdir'" \
       -c "ALTER SYSTEM SET log_filename = 'pg.log'" \
       -c "ALTER SYSTEM SET log_min_duration_statement = 0" \
       -c "ALTER SYSTEM SET log_connections = on" \
       -c "ALTER SYSTEM SET log_disconnections = on" \
       -c "ALTER SYSTEM SET log_lock_waits = on" \
       -c "ALTER SYSTEM SET deadlock_timeout = '200ms'" \
       -c "ALTER SYSTEM SET log_temp_files = 0" \
       -c "ALTER SYSTEM SET log_checkpoints = on" \
       -c "ALTER SYSTEM SET log_autovacuum_min_duration = 0" \
       -c "ALTER SYSTEM SET auto_explain.log_min_duration = '${explain_ms}ms'" \
       -c "ALTER SYSTEM SET auto_explain.log_analyze = on" "$@"
  local data="$dir/lab/data" bin
  bin=$(grep -o '"bin_dir": *"[^"]*"' "$dir/lab/state.json" | sed 's/.*: *"//; s/"$//')
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$bin/pg_ctl -D $data -w -l $dir/lab/server.log restart" >/dev/null
  else "$bin/pg_ctl" -D "$data" -w -l "$dir/lab/server.log" restart >/dev/null; fi
}

# explain_fixture DIR NAME OPTIONS SETUP QUERY: DIR/NAME.txt and
# DIR/NAME.json, the query explained with OPTIONS in TEXT and JSON, after
# one warm-up run (with ANALYZE) so that buffers and heap fetches do not
# depend on which format ran first; parallel workers and JIT off.
explain_fixture() {
  local out=$1 name=$2 opts=$3 setup=$4 query=$5 fmt ext
  for fmt in text json; do
    ext=txt
    [ "$fmt" = json ] && ext=json
    [[ "$opts" == ANALYZE* ]] && psql -A -t -c "SET max_parallel_workers_per_gather = 0; SET jit = off; $setup" -c "EXPLAIN ($opts, FORMAT $fmt) $query" >/dev/null
    psql -A -t -c "SET max_parallel_workers_per_gather = 0; SET jit = off; $setup" -c "EXPLAIN ($opts, FORMAT $fmt) $query" >"$out/$name.$ext"
  done
}
