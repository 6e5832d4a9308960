package rules

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// AutovacuumLagID is the rule id of autovacuum that does not get to the
// tables that need it: switched off, every worker busy, or throttled by
// its cost delay.
const AutovacuumLagID = "autovacuum-lag"

const (
	// avMinDead: a table past its trigger with fewer dead rows than this
	// is not worth a line, whatever its trigger says.
	avMinDead = 1000
	// avSlowHours: a run whose measured pace makes its table's heap a
	// scan of this many hours or more is too slow for a table that is
	// written (at the default throttle a VACUUM dirtying every page gets
	// through some 35 MB a second: half an hour is a 60 GB heap).
	avSlowHours = 0.5
	// avOwnShare: a table's own throttle that allows this share of the
	// server's cost a second, or less, is a crawl.
	avOwnShare = 0.25
	// avProposedLimit is the autovacuum_vacuum_cost_limit proposed for a
	// throttled server (ten times the default 200, a common setting on
	// SSDs); avPageCost is what a page costs a VACUUM that finds it in
	// shared buffers and dirties it (page_hit 1 + page_dirty 20), for the
	// pace estimated from settings alone.
	avProposedLimit = 2000
	avPageCost      = 21
)

// avState is what autovacuum-lag judges once per snapshot, and what
// table-bloat asks it about a table whose dead rows it reports.
type avState struct {
	server     model.VacuumThrottle
	maxWorkers int
	// off names the setting that stops autovacuum for the whole server
	// ("" when it runs).
	off string
	// saturated: every reading found every worker busy.
	saturated bool
	readings  int
	last      []model.AutovacuumWorker
	// waiting are this database's tables past their trigger that no
	// worker is on, most dead rows first; past all those past it.
	waiting, past []*model.Table
	// paces are the heap pages a second each worker of the last reading
	// scanned since the first (measured), by pid.
	paces map[int]float64
	// balanced is how many workers of the last reading share the server's
	// cost limit (those on tables without a throttle of their own).
	balanced int
	// hidden are the workers whose tables the role may not see, and
	// hiddenHere those of them in this database: as many of the tables
	// past their trigger may have a worker after all.
	hidden, hiddenHere int
}

func autovacuumState(s *model.Snapshot) *avState {
	st := &avState{server: s.AutovacuumThrottle(), maxWorkers: int(s.Settings["autovacuum_max_workers"].Float()), paces: map[int]float64{}}
	switch {
	case strings.EqualFold(s.Settings["autovacuum"].Value, "off"):
		st.off = "autovacuum"
	case strings.EqualFold(s.Settings["track_counts"].Value, "off"):
		st.off = "track_counts"
	}
	st.readings = len(s.Autovacuum)
	if st.readings > 0 {
		st.saturated = st.maxWorkers > 0
		for _, r := range s.Autovacuum {
			if len(r.Workers) < st.maxWorkers {
				st.saturated = false
			}
		}
		first, lastR := s.Autovacuum[0], s.Autovacuum[st.readings-1]
		st.last = lastR.Workers
		for _, w := range st.last {
			if w.Hidden {
				st.hidden++
				if w.Database == s.Database {
					st.hiddenHere++
				}
			}
			if t := s.TableByOID(w.TableOID); t == nil || !ownThrottle(s, t) {
				st.balanced++
			}
			if dt := lastR.At - first.At; dt >= 0.5 && w.Phase == "scanning heap" {
				for _, w0 := range first.Workers {
					if w0.PID == w.PID && w0.TableOID == w.TableOID && w0.Phase == "scanning heap" && w.HeapScanned >= w0.HeapScanned {
						st.paces[w.PID] = float64(w.HeapScanned-w0.HeapScanned) / dt
					}
				}
			}
		}
	}
	working := map[uint32]bool{}
	for _, w := range st.last {
		working[w.TableOID] = true
	}
	for i := range s.Tables {
		t := &s.Tables[i]
		if t.Partitioned || t.Dead < avMinDead || float64(t.Dead) <= s.VacuumTrigger(t) {
			continue
		}
		st.past = append(st.past, t)
		if !working[t.OID] {
			st.waiting = append(st.waiting, t)
		}
	}
	byDead := func(ts []*model.Table) {
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].Dead > ts[j].Dead })
	}
	byDead(st.past)
	byDead(st.waiting)
	return st
}

// ownThrottle says t's own storage parameters throttle its autovacuum to
// a crawl: avOwnShare of the server's cost a second or less.
func ownThrottle(s *model.Snapshot, t *model.Table) bool {
	if len(t.VacuumOptions) == 0 {
		return false // most tables: nothing to parse the server's settings for
	}
	th, own := s.TableThrottle(t)
	if !own || th.DelayMS <= 0 {
		return false
	}
	return th.CostPerSecond() <= avOwnShare*s.AutovacuumThrottle().CostPerSecond()
}

// worker is the worker of the last reading on t, if any.
func (st *avState) worker(t *model.Table) *model.AutovacuumWorker {
	for i, w := range st.last {
		if w.TableOID == t.OID && t.OID != 0 {
			return &st.last[i]
		}
	}
	return nil
}

// covers says why autovacuum-lag reports the cause of t's dead rows ("" when
// it does not): table-bloat's finding on t then points here.
func (st *avState) covers(s *model.Snapshot, t *model.Table) string {
	switch {
	case st.off != "":
		return fmt.Sprintf("%s is off for the whole server (see autovacuum-lag)", st.off)
	case ownThrottle(s, t):
		return "its own cost settings hold autovacuum to a crawl on it (see autovacuum-lag)"
	case st.serverLags(s) && contains(tableNames(st.past), t.QualifiedName()):
		return "autovacuum's workers do not keep up with the tables past their trigger (see autovacuum-lag)"
	}
	return ""
}

// serverLags: the server's workers, on the server's throttle, do not get
// to the tables that need them: all busy while tables wait, or one so
// slow that its table takes hours.
func (st *avState) serverLags(s *model.Snapshot) bool {
	if st.off != "" || len(st.last) == 0 || st.balanced == 0 {
		return false
	}
	return (st.saturated && len(st.waiting) > st.hiddenHere) || len(st.slowRuns(s)) > 0
}

// slowRuns are the workers of the last reading on the server's throttle
// whose measured pace leaves avSlowHours or more of their table's heap.
func (st *avState) slowRuns(s *model.Snapshot) []model.AutovacuumWorker {
	var out []model.AutovacuumWorker
	for _, w := range st.last {
		pace, measured := st.paces[w.PID]
		if !measured || w.Wraparound && st.server.DelayMS <= 0 {
			continue
		}
		if t := s.TableByOID(w.TableOID); t != nil && ownThrottle(s, t) {
			continue
		}
		if heapHours(w, pace) >= avSlowHours && hoursLeft(w, pace) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// heapHours is how long the worker's whole heap scan takes at pace.
func heapHours(w model.AutovacuumWorker, pace float64) float64 {
	if pace <= 0 {
		return math.Inf(1)
	}
	return float64(w.HeapTotal) / pace / 3600
}

func hoursLeft(w model.AutovacuumWorker, pace float64) float64 {
	left := float64(w.HeapTotal - w.HeapScanned)
	if left <= 0 {
		return 0
	}
	if pace <= 0 {
		return math.Inf(1)
	}
	return left / pace / 3600
}

func tableNames(ts []*model.Table) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.QualifiedName()
	}
	return out
}

// autovacuumLag finds tables autovacuum does not get to in time: the
// whole server's autovacuum off, every worker busy while tables past their
// trigger wait, runs so throttled by the cost delay that a table takes
// hours, and tables whose own storage parameters switch it off or slow
// it to a crawl.
func autovacuumLag(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	st := autovacuumState(s)
	var out []model.Finding
	if f := serverLagFinding(s, st); f != nil {
		out = append(out, *f)
	}
	for i := range s.Tables {
		if f := tableLagFinding(s, st, &s.Tables[i]); f != nil {
			out = append(out, *f)
		}
	}
	Sort(out)
	var skips []model.Skip
	if m, ok := s.Missing[model.SrcAutovacuum]; ok {
		skips = append(skips, model.Skip{Rule: AutovacuumLagID, Reason: "whether every autovacuum worker is busy was not judged: " + m.Reason, Fix: m.Fix})
	}
	if st.hidden > 0 {
		skips = append(skips, model.Skip{Rule: AutovacuumLagID,
			Reason: fmt.Sprintf("could not see which tables %d autovacuum workers were vacuuming, nor their pace: pg_stat_activity and pg_stat_progress_vacuum hide them from pgmedic's role", st.hidden),
			Fix:    fmt.Sprintf("GRANT pg_read_all_stats TO %s;", sqlparse.QuoteIdent(orUnknown(s.User)))})
	}
	return out, skips
}

// serverLagFinding is the finding about the server's autovacuum as a
// whole, or nil.
func serverLagFinding(s *model.Snapshot, st *avState) *model.Finding {
	f := model.Finding{Rule: AutovacuumLagID, Severity: model.Warning, Docs: docsPath(AutovacuumLagID)}
	waitingSQL := func(ts []*model.Table) string {
		var b strings.Builder
		for i, t := range ts {
			if i == 5 {
				fmt.Fprintf(&b, "-- and %d more past their trigger\n", len(ts)-5)
				break
			}
			fmt.Fprintf(&b, "VACUUM (VERBOSE) %s;\n", sqlparse.QuoteQualified(t.Schema, t.Name))
		}
		return b.String()
	}
	switch {
	case st.off != "" && len(st.past) > 0:
		f.Object = model.Object{Kind: "setting", Name: st.off}
		what := "autovacuum is switched off for the whole server (autovacuum = off): only the aggressive runs that prevent wraparound still start"
		if st.off == "track_counts" {
			what = "track_counts is off: without the row counters autovacuum cannot tell which tables need it, and vacuums none"
		}
		f.Title = fmt.Sprintf("%s; %s of this database are past their trigger (%s)", what, tablesWord(len(st.past)), waitingList(st.past))
		f.Evidence = append(pastEvidence(s, st.past), model.Evidence{Label: what, Value: 1, Fact: true})
		f.Impact = model.Impact{Summary: "dead rows pile up in every written table: scans read them, tables and indexes grow, index-only scans stop working, and freezing waits for the emergency runs"}
		f.Fix = model.Fix{Summary: "switch it back on (a reload is enough) and vacuum the tables furthest past their trigger now",
			SQL: fmt.Sprintf("ALTER SYSTEM SET %s = on;\nSELECT pg_reload_conf();\n%s", st.off, waitingSQL(st.past))}
		f.Verification = model.NotRunBecause("nothing to measure: autovacuum does nothing while " + st.off + " is off")
		return &f
	case !st.serverLags(s):
		return nil
	}
	slow := st.slowRuns(s)
	perWorker := st.server
	if st.balanced > 1 {
		perWorker.Limit /= float64(st.balanced)
	}
	throttled := st.server.DelayMS > 0 && st.server.Limit < avProposedLimit
	var parts []string
	if st.saturated {
		parts = append(parts, fmt.Sprintf("all %d autovacuum workers were busy at every look (%s)", st.maxWorkers, readingsWord(st.readings)))
	}
	for _, w := range slow {
		parts = append(parts, fmt.Sprintf("the worker on %s scans %s heap pages a second: %s for its %s pages, %s left", w.Table, paceText(st.paces[w.PID]),
			hoursText(heapHours(w, st.paces[w.PID])), printable.Count(float64(w.HeapTotal)), hoursText(hoursLeft(w, st.paces[w.PID]))))
	}
	switch {
	case st.saturated && st.hiddenHere > 0:
		parts = append(parts, fmt.Sprintf("%s are past the trigger (%s) and at most %d of them have a worker (which, pgmedic's role could not see)",
			tablesWord(len(st.waiting)), waitingList(st.waiting), st.hiddenHere))
	case st.saturated && len(st.waiting) > 0:
		verb := "wait"
		if len(st.waiting) == 1 {
			verb = "waits"
		}
		parts = append(parts, fmt.Sprintf("%s past the trigger %s for a worker (%s)", tablesWord(len(st.waiting)), verb, waitingList(st.waiting)))
	}
	f.Evidence = []model.Evidence{
		ev("autovacuum workers busy (autovacuum_max_workers)", float64(len(st.last)), ""),
		ev("autovacuum_max_workers", float64(st.maxWorkers), ""),
		ev("tables of this database past their trigger with no worker on them", float64(len(st.waiting)), ""),
		ev("autovacuum cost delay", st.server.DelayMS, "ms"),
		ev("autovacuum cost limit, shared by the workers", st.server.Limit, ""),
	}
	for _, w := range st.last {
		if p, ok := st.paces[w.PID]; ok && w.Table != "" {
			f.Evidence = append(f.Evidence, ev("heap pages a second the worker on "+w.Table+" scanned (measured)", model.Round(p, 2), "pages/s"))
		}
	}
	f.Evidence = append(f.Evidence, pastEvidence(s, st.waiting)...)
	f.Impact = model.Impact{Summary: "tables wait for a worker while their dead rows pile up: scans read them, tables and indexes grow, and the waiting lengthens as the queue does"}
	if !st.saturated || len(st.waiting) == 0 {
		f.Impact.Summary = "the table's dead rows stay until its slow vacuum is through, and its worker is not free for any other table all that time"
	}
	sql := ""
	if throttled {
		f.Object = model.Object{Kind: "setting", Name: "autovacuum_vacuum_cost_limit"}
		parts = append(parts, fmt.Sprintf("the workers share autovacuum_vacuum_cost_limit = %s, about %s each, and sleep %s ms whenever they spend it", settingText(st.server.Limit), settingText(math.Round(perWorker.Limit)), settingText(st.server.DelayMS)))
		sql = fmt.Sprintf("ALTER SYSTEM SET autovacuum_vacuum_cost_limit = %d;\nSELECT pg_reload_conf();\n", avProposedLimit)
		if !pgversion.Of(s.Server.VersionNum).VacuumReloadsCost {
			if len(slow) > 0 {
				sql += "-- before 16 a running worker keeps its limit until its table is done: cancel the slow one, the next run takes the new limit\n"
				for _, w := range slow {
					sql += fmt.Sprintf("SELECT pg_cancel_backend(%d); -- %s\n", w.PID, w.Table)
				}
			}
			if st.saturated && len(st.waiting) > 0 {
				sql += "-- and vacuum the waiting tables now\n"
			}
		}
		f.Fix = model.Fix{Summary: fmt.Sprintf("let autovacuum work faster: raise autovacuum_vacuum_cost_limit to %d (a reload; the limit is shared by the busy workers, so more workers alone would not go faster)", avProposedLimit)}
	} else {
		f.Object = model.Object{Kind: "setting", Name: "autovacuum_max_workers"}
		more := max(2*st.maxWorkers, st.maxWorkers+len(st.waiting))
		sql = fmt.Sprintf("ALTER SYSTEM SET autovacuum_max_workers = %d;\n", more)
		if pgversion.Of(s.Server.VersionNum).WorkerSlots {
			sql += "SELECT pg_reload_conf(); -- from 18 a reload, up to autovacuum_worker_slots (raising those needs a restart)\n"
		} else {
			sql += "-- takes effect at the next restart\n"
		}
		f.Fix = model.Fix{Summary: "the workers are not throttled and still do not keep up: give autovacuum more workers, and let the busiest tables trigger earlier (a lower autovacuum_vacuum_scale_factor on them) so each run is shorter"}
	}
	f.Fix.SQL = sql
	if st.saturated {
		f.Fix.SQL += waitingSQL(st.waiting)
	}
	f.Title = "autovacuum does not keep up: " + strings.Join(parts, "; ")
	if t := biggestLagging(s, st); t != nil && throttled {
		proposed := model.VacuumThrottle{DelayMS: st.server.DelayMS, Limit: avProposedLimit / float64(max(st.balanced, 1))}
		f.Experiment = vacuumThrottleExperiment(t, perWorker, proposed)
	} else if !throttled {
		f.Verification = model.NotRunBecause("the workers are not throttled (cost delay " + settingText(st.server.DelayMS) + " ms, cost limit " + settingText(st.server.Limit) + "): what more workers would do is not measured on a twin")
	} else {
		f.Verification = model.NotRunBecause("the tables the workers are on are not in this database: run check on theirs")
	}
	return &f
}

// tableLagFinding is the finding about t's own autovacuum settings, or
// nil: switched off while it is past its trigger (unless table-bloat
// reports its dead rows, with the same fix), or a throttle of its own
// that crawls while it needs vacuuming or is being vacuumed.
func tableLagFinding(s *model.Snapshot, st *avState, t *model.Table) *model.Finding {
	if t.Partitioned || st.off != "" {
		return nil
	}
	past := t.Dead >= avMinDead && float64(t.Dead) > s.VacuumTrigger(t)
	w := st.worker(t)
	// Decided before anything is built: this runs for every table.
	off := !t.AutovacuumEnabled && past && !deadRowsReported(t)
	if !off && (!ownThrottle(s, t) || !t.AutovacuumEnabled || (!past && w == nil)) {
		return nil
	}
	qt := sqlparse.QuoteQualified(t.Schema, t.Name)
	f := model.Finding{Rule: AutovacuumLagID, Severity: model.Warning, Docs: docsPath(AutovacuumLagID),
		Object: model.Object{Kind: "table", Name: t.QualifiedName(), Database: s.Database}}
	trigger := s.VacuumTrigger(t)
	f.Evidence = []model.Evidence{
		ev("dead rows", float64(t.Dead), ""),
		ev("live rows", float64(t.Live), ""),
		ev("its autovacuum trigger (dead rows)", math.Round(trigger), ""),
	}
	if t.LastVacuum != nil {
		f.Evidence = append(f.Evidence, ev("hours since its last vacuum", model.Round(s.CollectedAt.Sub(*t.LastVacuum).Hours(), 2), "h"))
	}
	if off {
		f.Title = fmt.Sprintf("autovacuum is switched off for %s (autovacuum_enabled = off) and it is past its trigger: %s dead rows against %s", t.QualifiedName(), printable.Count(float64(t.Dead)), printable.Count(math.Round(trigger)))
		f.Impact = model.Impact{Summary: "its dead rows are never removed and its rows never frozen but by the emergency anti-wraparound runs: it and its indexes grow with every update and delete"}
		f.Fix = model.Fix{Summary: "let autovacuum look after it again, and vacuum it now",
			SQL: fmt.Sprintf("ALTER TABLE %s RESET (autovacuum_enabled);\nVACUUM (VERBOSE) %s;", qt, qt)}
		f.Verification = model.NotRunBecause("nothing to measure: autovacuum does not run on it at all")
		return &f
	}
	th, _ := s.TableThrottle(t)
	srv := s.AutovacuumThrottle()
	share := th.CostPerSecond() / srv.CostPerSecond()
	f.Title = fmt.Sprintf("autovacuum crawls on %s: its own cost settings (delay %s ms, limit %s) allow %s cost units a second, %s of the server's", t.QualifiedName(), settingText(th.DelayMS), settingText(th.Limit), settingText(math.Round(th.CostPerSecond())), shareText(share))
	f.Evidence = append(f.Evidence,
		ev("its own cost delay", th.DelayMS, "ms"), ev("its own cost limit", th.Limit, ""),
		ev("cost a second its throttle allows", model.Round(th.CostPerSecond(), 1), ""),
		ev("cost a second the server's throttle allows", model.Round(srv.CostPerSecond(), 1), ""))
	if past {
		f.Title += fmt.Sprintf("; %s dead rows against its trigger of %s", printable.Count(float64(t.Dead)), printable.Count(math.Round(trigger)))
	}
	if w != nil {
		if p, ok := st.paces[w.PID]; ok {
			f.Title += fmt.Sprintf("; its worker scans %s heap pages a second, %s left", paceText(p), hoursText(hoursLeft(*w, p)))
			f.Evidence = append(f.Evidence, ev("heap pages a second its worker scanned (measured)", model.Round(p, 2), "pages/s"))
		} else {
			f.Title += fmt.Sprintf("; a worker has been on it for %s", durationText(w.RunningS))
		}
		f.Evidence = append(f.Evidence, ev("seconds its worker has been on it", math.Round(w.RunningS), "s"))
		if st.saturated && len(st.waiting) > 0 {
			f.Title += fmt.Sprintf("; it holds one of the %d workers, all busy, while %s wait", st.maxWorkers, tablesWord(len(st.waiting)))
		}
	}
	f.Impact = model.Impact{Summary: "its vacuum takes many times longer than the server's throttle would: dead rows stay, and a worker it holds is one the other tables wait for"}
	f.Fix = model.Fix{Summary: "drop its own throttle and let it vacuum at the server's pace",
		SQL: fmt.Sprintf("ALTER TABLE %s RESET (autovacuum_vacuum_cost_delay, autovacuum_vacuum_cost_limit);", qt)}
	if w != nil && !pgversion.Of(s.Server.VersionNum).VacuumReloadsCost {
		f.Fix.SQL += "\n-- before 16 the running worker keeps its throttle until it is done: cancel it, and the next run takes the new one\nSELECT pg_cancel_backend(" + strconv.Itoa(w.PID) + ");"
	}
	proposed := srv
	proposed.Limit /= float64(st.balanced + 1)
	f.Experiment = vacuumThrottleExperiment(t, th, proposed)
	return &f
}

// biggestLagging is the largest table of this database a worker of the
// last reading is on, or that waits: the one whose vacuum the throttle
// costs most.
func biggestLagging(s *model.Snapshot, st *avState) *model.Table {
	var best *model.Table
	consider := func(t *model.Table) {
		if t != nil && (best == nil || t.HeapBytes > best.HeapBytes) {
			best = t
		}
	}
	for _, w := range st.last {
		consider(s.TableByOID(w.TableOID))
	}
	for _, t := range st.waiting {
		consider(t)
	}
	return best
}

func vacuumThrottleExperiment(t *model.Table, now, proposed model.VacuumThrottle) *model.Experiment {
	set := func(v model.VacuumThrottle) map[string]string {
		return map[string]string{"vacuum_cost_delay": settingText(v.DelayMS), "vacuum_cost_limit": strconv.Itoa(max(1, int(math.Round(v.Limit))))}
	}
	return &model.Experiment{Kind: model.ExpVacuumThrottle, Table: model.RelRef{Schema: t.Schema, Name: t.Name},
		AppSettings: set(now), FixSettings: set(proposed)}
}

// deadRowsReported says table-bloat reports t's dead rows (and, for a
// table with autovacuum off, the same fix).
func deadRowsReported(t *model.Table) bool {
	return t.Dead >= bloatMinDead && float64(t.Dead) >= bloatDeadRatio*float64(t.Live)
}

func pastEvidence(s *model.Snapshot, ts []*model.Table) []model.Evidence {
	var out []model.Evidence
	for i, t := range ts {
		if i == 3 {
			break
		}
		out = append(out, ev("dead rows in "+t.QualifiedName()+" (its trigger "+printable.Count(math.Round(s.VacuumTrigger(t)))+")", float64(t.Dead), ""))
	}
	return out
}

func waitingList(ts []*model.Table) string {
	var parts []string
	for i, t := range ts {
		if i == 3 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s dead rows", t.QualifiedName(), printable.Count(float64(t.Dead))))
	}
	return strings.Join(parts, ", ")
}

func tablesWord(n int) string {
	if n == 1 {
		return "1 table"
	}
	return fmt.Sprintf("%d tables", n)
}

func readingsWord(n int) string {
	if n == 1 {
		return "one look, check did not sample"
	}
	return fmt.Sprintf("%d looks across the sample", n)
}

func hoursText(h float64) string {
	switch {
	case math.IsInf(h, 1):
		return "no progress at all"
	case h >= 48:
		return fmt.Sprintf("%.0f days", h/24)
	case h >= 1:
		return fmt.Sprintf("%.1f hours", h)
	}
	return fmt.Sprintf("%.0f minutes", math.Ceil(h*60))
}

func paceText(p float64) string {
	if p < 10 {
		return strconv.FormatFloat(model.Round(p, 1), 'f', -1, 64)
	}
	return printable.Count(math.Round(p))
}

func durationText(sec float64) string {
	if sec >= 3600 {
		return hoursText(sec / 3600)
	}
	if sec >= 120 {
		return fmt.Sprintf("%.0f minutes", sec/60)
	}
	return fmt.Sprintf("%.0f s", sec)
}

func shareText(x float64) string {
	if x > 0 && x < 0.01 {
		return fmt.Sprintf("1/%s", printable.Count(math.Round(1/x)))
	}
	return pct(x)
}

// num writes a setting's value as PostgreSQL would take it: no trailing
// zeros.
func settingText(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
