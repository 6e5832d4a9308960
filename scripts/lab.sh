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
