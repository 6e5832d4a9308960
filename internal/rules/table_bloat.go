package rules

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// TableBloatID is the rule id.
const TableBloatID = "table-bloat"

const (
	bloatMinDead    = 10000
	bloatDeadRatio  = 1.0 // dead rows per live row
	bloatCritical   = 5.0
	nonHOTMinUpdate = 10000
	nonHOTMaxShare  = 0.10
)

// tableBloat finds tables whose dead row versions outnumber the live ones
// (vacuum is off or not keeping up), and tables whose updates are never HOT
// because an updated column is in an index: PostgreSQL can only update a
// row in place on the same page (HOT, no index writes) when no indexed
// column, including a partial index's predicate column, changes.
func tableBloat(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	var out []model.Finding
	// Asked once: each holder's cost reads every table.
	held := reportedHolder(s)
	av := autovacuumState(s)
	for i := range s.Tables {
		t := &s.Tables[i]
		if t.Partitioned {
			continue
		}
		if deadRowsReported(t) {
			out = append(out, deadTupleFinding(s, t, held, av))
		}
		if f := nonHOTFinding(s, t); f != nil {
			out = append(out, *f)
		}
	}
	return out, nil
}

// deadTupleFinding reports a table whose dead rows are a large share of its
// rows, with when it was last vacuumed and the pgstattuple experiment;
// held is the xmin holder xmin-horizon reports, if any, and av what
// autovacuum-lag makes of the server's autovacuum.
func deadTupleFinding(s *model.Snapshot, t *model.Table, held *model.XminHolder, av *avState) model.Finding {
	ratio := float64(t.Dead) / math.Max(float64(t.Live), 1)
	sev := model.Warning
	if ratio >= bloatCritical {
		sev = model.Critical
	}
	trigger := s.Settings["autovacuum_vacuum_threshold"].Float() + s.Settings["autovacuum_vacuum_scale_factor"].Float()*math.Max(t.Reltuples, 0)
	var why string
	qt := sqlparse.QuoteIdent(t.Schema) + "." + sqlparse.QuoteIdent(t.Name)
	sql := fmt.Sprintf("VACUUM (VERBOSE, ANALYZE) %s;", qt)
	switch {
	case !t.AutovacuumEnabled:
		why = "autovacuum is switched off for this table (autovacuum_enabled = off)"
		sql += fmt.Sprintf("\nALTER TABLE %s RESET (autovacuum_enabled);", qt)
	case av.covers(s, t) != "":
		// Why autovacuum does not get to it is autovacuum-lag's finding;
		// the dead rows are this one's, as information.
		why = av.covers(s, t)
		sev = model.Info
	case recentlyVacuumed(s, t):
		// A retention delete or a burst of updates leaves its dead rows
		// until the next round of the launcher: a table vacuumed moments
		// ago is being kept up with.
		why = fmt.Sprintf("vacuumed %s ago, and autovacuum comes back to it within autovacuum_naptime: these are one round's dead rows, not a backlog", durationText(s.CollectedAt.Sub(*t.LastVacuum).Seconds()))
		sev = model.Info
	default:
		why = fmt.Sprintf("autovacuum has not kept up: %s dead rows against a trigger of about %s", count(float64(t.Dead)), count(trigger))
		sql += fmt.Sprintf("\n-- queue tables churn: vacuum them sooner\nALTER TABLE %s SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);", qt)
	}
	ev := []model.Evidence{
		{Label: "live rows", Value: float64(t.Live)},
		{Label: "dead rows", Value: float64(t.Dead)},
		{Label: "dead rows per live row", Value: model.Round(ratio, 2)},
		{Label: "table size (heap)", Value: model.Round(float64(t.HeapBytes)/(1<<20), 2), Unit: "MB"},
		{Label: "vacuums since statistics reset", Value: float64(t.VacuumCount)},
	}
	if t.LastVacuum != nil {
		ev = append(ev, model.Evidence{Label: "hours since the last vacuum", Value: model.Round(s.CollectedAt.Sub(*t.LastVacuum).Hours(), 2)})
	}
	ev = append(ev, churn(s, t)...)
	// Dead rows kept by a holder of the xmin horizon are not VACUUM's to
	// remove: the problem is the holder's (one problem, one finding).
	if h := held; h != nil {
		sev = model.Info
		why += fmt.Sprintf("; no VACUUM can remove those that died after %s %s began (see xmin-horizon)", holderWord(h.Kind), h.Name)
	}
	return model.Finding{
		Rule:         TableBloatID,
		Severity:     sev,
		Title:        fmt.Sprintf("%s holds %.1f dead rows per live row: %s", t.Schema+"."+t.Name, ratio, why),
		Object:       model.Object{Kind: "table", Name: t.Schema + "." + t.Name, Database: s.Database},
		Evidence:     ev,
		Impact:       model.Impact{Summary: "every scan reads the dead versions too, the table and its indexes keep growing, and index-only scans stop working as the visibility map goes stale"},
		Fix:          model.Fix{Summary: "vacuum the table now and let autovacuum keep up with its churn", SQL: sql},
		Verification: model.NotRunBecause("verification was not run"),
		Docs:         docsPath(TableBloatID),
		Experiment:   &model.Experiment{Kind: model.ExpTableStats, Table: model.RelRef{Schema: t.Schema, Name: t.Name}},
	}
}

// churn is the table's write rate since statistics were reset.
func churn(s *model.Snapshot, t *model.Table) []model.Evidence {
	writes := float64(t.Inserted + t.Updated + t.Deleted)
	ev := []model.Evidence{
		{Label: "rows inserted", Value: float64(t.Inserted)},
		{Label: "rows updated", Value: float64(t.Updated)},
		{Label: "rows deleted", Value: float64(t.Deleted)},
	}
	if r := s.DatabaseStats.StatsReset; r != nil && s.CollectedAt.After(*r) {
		ev = append(ev, model.Evidence{Label: "row writes per second since statistics reset", Value: model.Round(writes/s.CollectedAt.Sub(*r).Seconds(), 2)})
	}
	return ev
}

// indexedSet is an updated column an index depends on, and how.
type indexedSet struct{ col, index, how string }

// indexedUpdates finds, over the UPDATEs of t, the columns they set that an
// index depends on (keys, INCLUDE, predicate, expression), and the busiest
// such UPDATE: the experiment replays it.
func indexedUpdates(s *model.Snapshot, t *model.Table) (hits []indexedSet, busiest *model.Statement) {
	seen := map[string]bool{}
	for i, st := range s.Statements {
		sh := s.Shapes[st.QueryID]
		if sh == nil || sh.Command != "UPDATE" || s.Table(sh.Target) != t {
			continue
		}
		before := len(hits)
		for _, col := range sh.SetColumns {
			for _, ix := range s.TableIndexes(t) {
				how := ""
				switch {
				case contains(ix.Columns, col):
					how = "a key column"
				case contains(ix.Include, col):
					how = "an INCLUDE column"
				case mentions(ix.Predicate, col):
					how = "in the partial-index predicate"
				case contains(ix.Columns, "") && mentions(ix.Def, col):
					how = "in an index expression"
				}
				if how != "" && !seen[col+ix.Name] {
					seen[col+ix.Name] = true
					hits = append(hits, indexedSet{col, ix.Name, how})
				}
			}
		}
		if len(hits) > before && (busiest == nil || st.Calls > busiest.Calls) {
			busiest = &s.Statements[i]
		}
	}
	return hits, busiest
}

// nonHOTFinding reports a table whose updates are rarely HOT (heap-only):
// each such update writes every index, usually because it sets an indexed
// column (often one in a partial index's predicate) or the page has no
// room (fillfactor).
func nonHOTFinding(s *model.Snapshot, t *model.Table) *model.Finding {
	if t.Updated < nonHOTMinUpdate || float64(t.HOTUpdated) > nonHOTMaxShare*float64(t.Updated) {
		return nil
	}
	hits, busiest := indexedUpdates(s, t)
	if len(hits) == 0 {
		return nil // low HOT share without an indexed column: full pages, see fillfactor; not diagnosed here
	}
	var parts, indexes []string
	for _, h := range hits {
		parts = append(parts, fmt.Sprintf("%s is %s of %s", h.col, h.how, h.index))
		if !contains(indexes, h.index) {
			indexes = append(indexes, h.index)
		}
	}
	hotShare := float64(t.HOTUpdated) / float64(t.Updated)
	nidx := len(s.TableIndexes(t))
	// An index the updates write and nothing reads is the one to drop:
	// this finding says so, and unused-index leaves it to this one.
	var drops []string
	for _, ix := range s.TableIndexes(t) {
		if contains(indexes, ix.Name) && unusedOn(s, ix) != nil {
			drops = append(drops, ix.Name)
		}
	}
	ev := append([]model.Evidence{
		{Label: "HOT updates", Value: model.Round(hotShare*100, 2), Unit: "%"},
		{Label: "indexes written by every non-HOT update", Value: float64(nidx)},
	}, churn(s, t)...)
	f := &model.Finding{
		Rule:     TableBloatID,
		Severity: model.Warning,
		Title:    fmt.Sprintf("updates of %s are never HOT (%.0f%%): %s", t.Schema+"."+t.Name, hotShare*100, strings.Join(parts, "; ")),
		Object:   model.Object{Kind: "table", Name: t.Schema + "." + t.Name + " (updates)", Database: s.Database},
		Evidence: ev,
		Impact:   model.Impact{Summary: fmt.Sprintf("write amplification: each update writes a new entry into all %d indexes and leaves a dead row and dead index entries for vacuum", nidx)},
		Fix: model.Fix{Summary: "keep frequently updated columns out of indexes and index predicates where the queries allow it (e.g. mark claims in a narrow side table), and vacuum the table often; fillfactor only helps HOT when no indexed column changes",
			// Names in a comment: a newline in one would end the comment
			// and turn the rest into SQL when pasted.
			SQL: fmt.Sprintf("-- columns updated that an index depends on: %s", printable.String(strings.Join(parts, "; ")))},
		Verification: model.Verification{Status: model.NotRun, Method: "pg_stat_user_tables n_tup_hot_upd / n_tup_upd", Reason: "the counters are measured by PostgreSQL itself; pgmedic does not write to test a change of indexes"},
		Experiment: &model.Experiment{Kind: model.ExpHOTUpdate, Query: busiest.Query, Stmt: busiest.Parsed, QueryID: busiest.QueryID,
			Role: busiest.Role, Calls: busiest.Calls, Rows: busiest.Rows, Table: model.RelRef{Schema: t.Schema, Name: t.Name}, Indexes: indexes},
		Docs: docsPath(TableBloatID),
	}
	if len(drops) > 0 {
		f.Title += fmt.Sprintf("; %s never scanned", strings.Join(drops, ", "))
		f.Fix.Summary = fmt.Sprintf("%s: no statement scanned it since the statistics began, so drop it and the updates stay on their page (HOT); ", strings.Join(drops, ", ")) + f.Fix.Summary
		for _, d := range drops {
			f.Fix.SQL += fmt.Sprintf("\nDROP INDEX CONCURRENTLY %s;", sqlparse.QuoteQualified(t.Schema, d))
		}
	}
	return f
}

// Thresholds of table-bloat (see docs/rules/table-bloat.md).
const (
	stuckMinRows  = 10000 // dead rows vacuum could not remove
	stuckMinShare = 0.1   // ... as a share of the table's rows
)

// tableBloatLog: dead rows vacuum found but could not remove because a
// snapshot still saw them.
func tableBloatLog(in LogInput) []model.Finding {
	var out []model.Finding
	for _, t := range in.Events.Tables {
		if t.NotRemovable < stuckMinRows || float64(t.NotRemovable) < stuckMinShare*float64(t.RemainAt) {
			continue
		}
		sev, cleared := model.Warning, ""
		if t.LastNotRemovable == 0 {
			sev, cleared = model.Info, "; a later run removed them, so what held them had gone by the end of the log"
		}
		out = append(out, model.Finding{Rule: TableBloatID, Severity: sev,
			Title:  fmt.Sprintf("autovacuum could not remove %s dead rows of %s: a snapshot still saw them%s", count(float64(t.NotRemovable)), t.Table, cleared),
			Object: model.Object{Kind: "table (log)", Name: t.Table},
			Evidence: []model.Evidence{ev("dead rows not yet removable, most in one run", float64(t.NotRemovable), "rows"), ev("rows in the table then", float64(t.RemainAt), "rows"),
				ev("dead rows not yet removable, last run", float64(t.LastNotRemovable), "rows"), ev2("autovacuum runs", t.Vacuums), ev("dead rows removed", float64(t.Removed), "rows")},
			Impact: model.Impact{Summary: "vacuum ran and left the dead rows: the table and its indexes grow, scans read the dead versions, and every run repeats the work"},
			Fix: model.Fix{Summary: "find what holds the xmin horizon back: a long transaction or a session idle in one (end it; set idle_in_transaction_session_timeout), a replication slot or a standby with hot_standby_feedback, a forgotten prepared transaction",
				SQL: "SELECT pid, state, now() - xact_start AS open_for, backend_xmin FROM pg_stat_activity WHERE backend_xmin IS NOT NULL ORDER BY age(backend_xmin) DESC LIMIT 5;\n" +
					"SELECT slot_name, xmin, catalog_xmin FROM pg_replication_slots;\nSELECT gid, prepared FROM pg_prepared_xacts;"},
			Verification: loggedVerification, Docs: docsPath(TableBloatID)})
	}
	return out
}

// recentlyVacuumed: the table, under autovacuum, was vacuumed within
// three of the launcher's rounds (autovacuum_naptime, a minute by
// default), or a minute, before the snapshot.
func recentlyVacuumed(s *model.Snapshot, t *model.Table) bool {
	if !t.AutovacuumEnabled || t.LastVacuum == nil {
		return false
	}
	naptime := s.Settings["autovacuum_naptime"].Float()
	if naptime <= 0 {
		naptime = 60
	}
	return s.CollectedAt.Sub(*t.LastVacuum) <= max(time.Duration(3*naptime*float64(time.Second)), time.Minute)
}
