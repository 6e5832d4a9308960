package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/pgmedic/pgmedic/internal/bundle"
	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// bundle writes an incident's bundle: the ring's records of its window,
// and a snapshot of the database its sessions involved most, read now
// (catalogs, settings, the plans of the statements that ran in the
// window) with the window's sessions and statements in place of check's
// own. A failure is logged: the ring still holds the window.
func (w *watcher) bundle(ctx context.Context, inc *Incident) {
	if err := w.writeBundle(ctx, inc); err != nil {
		w.cfg.Log("%s: the bundle of incident %s could not be written: %v", w.t.Name, inc.ID, err)
		return
	}
	w.stats.Incidents++
	w.cfg.Metrics.add(w.t.Name, "incidents", 1)
	dir := filepath.Join(w.cfg.Dir, "incidents", inc.ID)
	w.cfg.Log("%s: incident %s closed: bundle %s", w.t.Name, inc.ID, dir)
	w.pruneBundles()
	if w.cfg.Bundled != nil {
		w.cfg.Bundled(w.t, dir, inc)
	}
}

func (w *watcher) writeBundle(ctx context.Context, inc *Incident) error {
	now := time.Now()
	// The statements up to now, so the window's are all on the ring. A
	// watch that lost its connection writes what the ring holds.
	if w.sess != nil {
		if _, err := w.readStatements(ctx, now); err != nil {
			w.cfg.Log("%s: reading pg_stat_statements for the bundle: %v", w.t.Name, err)
		}
	}
	recs, skipped, err := w.ring.Read(inc.From, now)
	if err != nil {
		return err
	}
	w.stats.RingSkipped += skipped
	var ticks []Record
	var stmts []Record
	meta := bundle.Meta{PGMedic: w.cfg.Version, Target: w.t.Name, Labels: w.t.Labels, Server: w.target,
		IncidentWindow: model.IncidentWindow{From: inc.From.UTC(), To: inc.To.UTC(), Opened: inc.Opened.UTC(), Firings: inc.Firings, Fired: inc.Fired, CutShort: inc.CutShort},
		ServerCores:    w.server.Cores, CoresGuessed: w.server.CoresGuessed}
	for _, f := range inc.Triggers {
		meta.Triggers = append(meta.Triggers, f.Kind+": "+f.Detail)
	}
	for _, r := range recs {
		switch {
		case r.Kind == "tick" && !r.At.After(inc.To):
			ticks = append(ticks, r)
		case r.Kind == "statements" && r.At.After(inc.From):
			stmts = append(stmts, r)
		case r.Kind == "gap" && r.At.Before(inc.To):
			meta.Gaps = append(meta.Gaps, fmt.Sprintf("not connected from %s to %s: %s", r.At.Format(time.RFC3339), r.Until.Format(time.RFC3339), r.Note))
		}
	}
	if skipped > 0 {
		meta.Notes = append(meta.Notes, fmt.Sprintf("%d lines of the ring could not be read back (cut by a crash or a full disk)", skipped))
	}
	db := incidentDatabase(ticks, inc, w.server.Database)
	meta.Database = db
	window := map[stmtKey]Statement{}
	for _, r := range stmts {
		for _, st := range r.Statements {
			if st.Database != db {
				continue
			}
			k := stmtKey{st.Database, st.UserID, st.QueryID}
			if prev, ok := window[k]; ok {
				st = sumStatements(prev, st, 1)
				st.Query = prev.Query
			}
			window[k] = st
		}
	}
	meta.Ticks, meta.Statements = len(ticks), len(window)
	if w.pgss == "" && w.pgssNote != "" {
		meta.Notes = append(meta.Notes, w.pgssNote)
	}
	snap, err := w.snapshot(ctx, db, window)
	if err != nil {
		// The incident is kept without the catalogs: its sessions and
		// statements are what it was.
		meta.Notes = append(meta.Notes, fmt.Sprintf("the catalogs of database %s could not be read when the incident closed (%s): the rules that read tables, indexes and plans had nothing to read", db, envelope.Message(err)))
		snap = &model.Snapshot{CollectedAt: time.Now().UTC(), Database: db, Missing: map[string]model.Skip{},
			Server: model.Server{Version: w.server.Version, VersionNum: w.server.VersionNum}, ServerCores: w.server.Cores, CoresGuessed: w.server.CoresGuessed}
		for _, st := range window {
			snap.Statements = append(snap.Statements, st.Statement)
		}
	}
	// The rules judge the stretch in which the triggers fired, as check
	// judges the seconds it samples: a minute of calm around a storm
	// would hide it in the averages. The whole window is in window.jsonl.
	lookback := max(3*w.cfg.Interval, 2*time.Second)
	from, to := inc.Opened, inc.LastFire
	if !inc.SessionsFrom.IsZero() {
		from, to = inc.SessionsFrom, inc.SessionsTo
	}
	var firing []Record
	for _, r := range ticks {
		if !r.At.Before(from.Add(-lookback)) && !r.At.After(to.Add(w.cfg.Interval)) {
			firing = append(firing, r)
		}
	}
	snap.Sampling = sampling(firing, db, w.cfg.Interval, w.server.VersionNum)
	if w.bouncer != nil {
		snap.Sampling.PgBouncer = w.bouncer.Version
	}
	collect.Sampled(snap, snap.Sampling)
	dir := filepath.Join(w.cfg.Dir, "incidents", inc.ID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("creating the incidents directory: %w", err)
	}
	return bundle.Write(dir, meta, snap, func(path string) error {
		// The window holds the sessions' texts, values included: its
		// owner's only, as the rest of the bundle and the ring are.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for _, r := range recs {
			if !r.At.After(inc.To) || r.Kind == "statements" {
				enc.Encode(r)
			}
		}
		return f.Close()
	})
}

// incidentDatabase is the database with the most sessions at work or
// waiting while the triggers fired: the one whose catalogs explain it.
func incidentDatabase(ticks []Record, inc *Incident, watched string) string {
	n := map[string]int{}
	for _, r := range ticks {
		if r.At.Before(inc.Opened.Add(-2*time.Second)) || r.At.After(inc.LastFire) || r.Sample == nil {
			continue
		}
		for _, b := range r.Sample.Backends {
			if b.State != "idle" && b.Database != "" {
				n[b.Database]++
			}
		}
	}
	best := watched
	for db, c := range n {
		if c > n[best] || (c == n[best] && db < best && best != watched) {
			best = db
		}
	}
	return best
}

// snapshot reads the database's catalogs, settings and the plans of the
// window's statements. Watch keeps one connection: for another database
// than its own it closes it, reads that database, and connects again.
func (w *watcher) snapshot(ctx context.Context, db string, window map[stmtKey]Statement) (*model.Snapshot, error) {
	sess := w.sess
	if sess == nil {
		return nil, errNotConnected
	}
	if db != w.server.Database {
		w.close()
		defer func() {
			if w.sess == nil {
				if err := w.connect(ctx); err != nil {
					w.cfg.Log("%s: reconnecting after reading database %s: %v", w.t.Name, db, err)
				}
			}
		}()
		var err error
		sess, err = envelope.Connect(ctx, w.t.DSN, envelope.Options{StatementTimeout: 10 * time.Second, Database: db})
		if err != nil {
			return nil, fmt.Errorf("reading database %s for the bundle: %w", db, err)
		}
		w.own.sessions.Add(1)
		defer sess.Close()
	}
	opts := collect.Defaults()
	opts.SampleFor = 0
	opts.Statements = func(read []model.Statement) []model.Statement {
		roles := map[uint32]string{}
		for _, st := range read {
			roles[st.UserID] = st.Role
		}
		out := make([]model.Statement, 0, len(window))
		for _, st := range window {
			s := st.Statement
			s.Role = roles[s.UserID]
			out = append(out, s)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].TotalExecMS > out[j].TotalExecMS })
		return out
	}
	snap, err := collect.SnapshotWith(ctx, w.own.counted(sess.Conn), time.Now(), opts)
	if err != nil {
		return nil, fmt.Errorf("reading database %s for the bundle: %w", db, err)
	}
	// Roles the window's statements ran as that check's reading did not
	// name: the role table has them.
	for i := range snap.Statements {
		if snap.Statements[i].Role == "" {
			snap.Statements[i].Role = snap.Roles[snap.Statements[i].UserID]
		}
	}
	snap.ServerCores, snap.CoresGuessed = w.server.Cores, w.server.CoresGuessed
	return snap, nil
}

// sampling is the window's ticks as check's sampler would have made them,
// with the database's counters' change over the window.
func sampling(ticks []Record, db string, interval time.Duration, versionNum int) *model.Sampling {
	sm := &model.Sampling{IntervalMS: float64(interval.Milliseconds())}
	if len(ticks) == 0 {
		return sm
	}
	sm.Start = ticks[0].At
	hidden := 0
	for _, r := range ticks {
		hidden = max(hidden, r.Hidden)
	}
	if hidden > 0 {
		sm.HiddenSessions = hidden
		sm.Hidden = fmt.Sprintf("%d sessions of other roles showed no state, wait or statement: GRANT pg_read_all_stats TO the role watch connects as", hidden)
	}
	sm.Seconds = ticks[len(ticks)-1].At.Sub(ticks[0].At).Seconds() + interval.Seconds()
	for _, r := range ticks {
		if r.Sample != nil {
			sm.Samples = append(sm.Samples, *r.Sample)
		}
		if r.Pools != nil {
			sm.Pools = append(sm.Pools, *r.Pools)
		}
		sm.OverheadMS += r.TickMS
	}
	first, last := ticks[0].Databases, ticks[len(ticks)-1].Databases
	key := db
	if _, ok := first[key]; !ok {
		key = "*"
	}
	if a, ok := first[key]; ok {
		if b, ok := last[key]; ok {
			sm.Delta = addDelta(b, a, -1)
		}
	}
	if h := pgversion.Of(versionNum); !h.SessionStats {
		sm.NoSessionCounts = h.Lacks("pg_stat_database.sessions", 14) + ": new connections were not counted"
	}
	return sm
}

// pruneBundles keeps the newest MaxBundles bundles.
func (w *watcher) pruneBundles() {
	dir := filepath.Join(w.cfg.Dir, "incidents")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && e.Name()[0] != '.' {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for len(names) > w.cfg.MaxBundles {
		os.RemoveAll(filepath.Join(dir, names[0]))
		names = names[1:]
	}
}
