package collect

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
)

// autovacuumSQL reads every autovacuum worker of the server with the
// progress of its VACUUM (none for an ANALYZE). A role without
// pg_read_all_stats sees neither the backend type, nor the query, nor the
// table of another role's process, but still its database and its role
// (a client's) or none (a background worker's): a worker of a database
// with no role is an autovacuum worker, counted and marked hidden.
const autovacuumSQL = `SELECT a.pid, coalesce(a.datname, ''), coalesce(a.query, ''),
	coalesce(extract(epoch FROM clock_timestamp() - coalesce(a.query_start, a.xact_start, a.backend_start)), 0)::float8,
	CASE WHEN a.datname = current_database() THEN coalesce(p.relid, 0) ELSE 0 END::int8,
	coalesce(p.phase, ''), coalesce(p.heap_blks_total, 0)::int8, coalesce(p.heap_blks_scanned, 0)::int8,
	extract(epoch FROM clock_timestamp())::float8
	FROM pg_stat_activity a LEFT JOIN pg_stat_progress_vacuum p ON p.pid = a.pid
	WHERE a.backend_type = 'autovacuum worker' OR (a.backend_type IS NULL AND a.usesysid IS NULL AND a.datid IS NOT NULL)
	ORDER BY a.pid`

// autovacuum appends one reading of the autovacuum workers to the
// snapshot; the first that fails leaves the readings out (see Missing).
func autovacuum(ctx context.Context, q envelope.Conn, s *model.Snapshot) {
	if _, failed := s.Missing[model.SrcAutovacuum]; failed {
		return
	}
	r, err := autovacuumReading(ctx, q)
	if err != nil {
		s.Missing[model.SrcAutovacuum] = skipFor(s, "cannot read what the autovacuum workers do", err)
		s.Autovacuum = nil
		return
	}
	s.Autovacuum = append(s.Autovacuum, r)
}

func autovacuumReading(ctx context.Context, q envelope.Conn) (model.AutovacuumReading, error) {
	var r model.AutovacuumReading
	rows, err := q.Query(ctx, envelope.Tag+autovacuumSQL)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var w model.AutovacuumWorker
		var query string
		var oid int64
		if err := rows.Scan(&w.PID, &w.Database, &query, &w.RunningS, &oid, &w.Phase, &w.HeapTotal, &w.HeapScanned, &r.At); err != nil {
			return r, err
		}
		w.TableOID = uint32(oid)
		if query == "" || query == "<insufficient privilege>" {
			w.Hidden = true
		} else {
			w.Table, w.Analyze, w.Wraparound = model.ParseAutovacuumQuery(query)
		}
		r.Workers = append(r.Workers, w)
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	if r.At == 0 {
		// No worker: the clock still dates the reading.
		err = q.QueryRow(ctx, envelope.Tag+"SELECT extract(epoch FROM clock_timestamp())::float8").Scan(&r.At)
	}
	return r, err
}

// storageOptions reads what the rules need of a table's storage
// parameters (pg_class.reloptions, "name=value" as the user wrote them):
// whether autovacuum is switched off for it, whether VACUUM may truncate
// its empty end, its own freeze age, and its
// autovacuum_vacuum_* settings. Reading them here rather than with a
// sub-select per table keeps the table pages of a million-relation
// database within their time.
func storageOptions(t *model.Table, opts []string) {
	t.AutovacuumEnabled = true
	t.VacuumOptions = vacuumOptions(opts)
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "autovacuum_enabled":
			if on, ok := parseBool(v); ok {
				t.AutovacuumEnabled = on
			}
		case "vacuum_truncate":
			if on, ok := parseBool(v); ok {
				t.KeepsEmptyEnd = !on
			}
		case "autovacuum_freeze_max_age":
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				t.FreezeMaxAge = n
			}
		}
	}
}

// parseBool reads a boolean as PostgreSQL does (parse_bool): true, false,
// yes, no, on, off, 1, 0, or any unambiguous prefix of the words ("t",
// "of"), in any case; ok is false for anything else.
func parseBool(v string) (value, ok bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case "1", "on":
		return true, true
	case "0":
		return false, true
	}
	if v == "" || v == "o" {
		return false, false
	}
	for _, w := range []struct {
		word  string
		value bool
	}{{"true", true}, {"yes", true}, {"false", false}, {"no", false}, {"off", false}} {
		if strings.HasPrefix(w.word, v) && (w.word != "off" || len(v) >= 2) {
			return w.value, true
		}
	}
	return false, false
}

// vacuumOptions keeps a table's autovacuum_vacuum_* storage parameters
// ("autovacuum_vacuum_cost_delay=20") by the rest of their name; values
// that are not numbers are left out.
func vacuumOptions(opts []string) map[string]float64 {
	var out map[string]float64
	for _, o := range opts {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			continue
		}
		k, ok = strings.CutPrefix(strings.ToLower(k), "autovacuum_vacuum_")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[k] = f
	}
	return out
}
