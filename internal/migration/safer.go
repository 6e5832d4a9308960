package migration

import (
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Step is one statement of a migration's safe form, with how to run it.
type Step struct {
	SQL string `json:"sql"`
	// Of is the statement of the file it replaces (its N).
	Of int `json:"of"`
	// Retry: its lock conflicts with the application's reads or writes,
	// so it runs under a short lock_timeout and is tried again after a
	// pause when the timeout ends it (SQLSTATE 55P03), rather than
	// queueing the application behind it.
	Retry bool `json:"retry,omitempty"`
	// Batches: run it again until it changes no row (a backfill, one
	// short transaction per batch).
	Batches bool `json:"batches,omitempty"`
	// Written says it is the statement as written (only its lock_timeout
	// and retries are new).
	Written bool `json:"written,omitempty"`
}

// BackfillBatch is the rows one backfill batch updates: small enough
// that a batch's row locks last milliseconds, large enough that a table
// of millions takes hundreds of batches, not millions.
const BackfillBatch = 5000

// Safer is the statement's safe form: the steps that make the same change
// without stopping the application for long. rewrote says the rehearsal
// saw the statement rewrite its table (a new relfilenode), which is what
// decides whether an ADD COLUMN with a default needs its backfill.
// Statements that take no lock the application waits for are kept as
// they are, and so is transaction control: the safe form runs each step
// in its own transaction, because CONCURRENTLY cannot run inside a block,
// and a lock_timeout retry retries one step, not the whole block.
func Safer(s *Statement, rewrote bool) []Step { return SaferWith(s, rewrote, nil) }

// SaferWith is Safer where the migration's database can be read (facts):
// a column's type change is then made through a new column
// (TypeByNewColumn), which only the column's keys, default and indexes
// make possible to write. Where they name a blocker, the statement keeps
// its form as written and s.Kept says why.
func SaferWith(s *Statement, rewrote bool, facts Facts) []Step {
	if s.Transaction {
		return nil
	}
	if s.parsed != nil && len(s.parsed.Actions()) <= 1 {
		if table, column, _, _, ok := s.parsed.TypeChange(); ok && rewrote {
			var f *ColumnFacts
			var err error
			if facts != nil {
				f, err = facts(table, column)
			}
			steps, why, ok := TypeByNewColumn(s.parsed, f, BackfillBatch)
			switch {
			case err != nil:
				s.Kept = "the column's keys, default and indexes could not be read: " + err.Error()
			case ok:
				for i := range steps {
					steps[i].Of = s.N
				}
				return steps
			default:
				s.Kept = why
			}
		}
	}
	if s.ddl == nil {
		return []Step{{SQL: s.SQL, Of: s.N, Written: true}}
	}
	if acts := s.parsed.Actions(); len(acts) > 1 {
		var out []Step
		for _, a := range acts {
			one := describe(s.N, s.Line, a.Text(), a)
			out = append(out, SaferWith(one, rewrote, facts)...)
			if one.Kept != "" {
				s.Kept = one.Kept
			}
		}
		return out
	}
	step := func(sql string) Step {
		st, err := sqlparse.Parse(sql)
		if err != nil || st.DDL() == nil {
			return Step{SQL: sql, Of: s.N}
		}
		lock := Lock(st.DDL())
		return Step{SQL: sql, Of: s.N, Retry: BlocksReads(lock) || BlocksWrites(lock)}
	}
	var sqls []string
	if c, ok := s.parsed.Concurrently(); ok {
		sqls = []string{c}
	} else if steps, ok := s.parsed.NotValid(); ok {
		sqls = steps
	} else if steps, ok := s.parsed.NotNullByCheck(); ok {
		sqls = steps
	} else if steps, ok := s.parsed.UniqueByIndex(); ok {
		sqls = steps
	} else if steps, backfill, after, ok := s.parsed.DefaultByBackfill(BackfillBatch); ok && (rewrote || s.Rewrites != "") {
		var out []Step
		for _, q := range steps {
			out = append(out, step(q))
		}
		out = append(out, Step{SQL: backfill, Of: s.N, Batches: true})
		for _, q := range after {
			out = append(out, step(q))
		}
		return out
	}
	if sqls == nil {
		st := step(s.SQL)
		st.Written = true
		return []Step{st}
	}
	var out []Step
	for _, q := range sqls {
		out = append(out, step(q))
	}
	return out
}
