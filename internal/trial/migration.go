package trial

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/report"
)

// MigrationOptions are `rehearse migration`'s.
type MigrationOptions struct {
	SourceOptions
	// File names the migration and Script holds it.
	File   string
	Script []byte
	// Source is the server the migration is for (read only: its tables
	// are copied into a twin, TwinDSN's database when given).
	Source string
	// Logs and Sources are the captured workload's logs; Read how to
	// read them, Database whose sessions to keep.
	Logs     []string
	Sources  []logs.Source
	Read     logs.Options
	Database string
	// MaxWait: an application session that waited behind a statement
	// longer than this was queued by it. Before is the traffic replayed
	// before the first statement; StepTimeout bounds each statement.
	MaxWait, Before, StepTimeout time.Duration
	// FailOn are the outcomes that make the exit code 1.
	FailOn []string
}

// FailOnMigration are the outcomes --fail-when names, and what each means.
var FailOnMigration = []struct{ Name, Means string }{
	{"queued", "a statement as written queued the application past --max-wait (without --source: a statement whose lock stops reads or writes)"},
	{"failed", "a statement as written failed on the twin"},
	{"rewrite", "a statement rewrote its table"},
	{"none", "never exit 1"},
}

// ErrMigrationRisky is a rehearsal whose migration, as written, did what
// --fail-when names: exit 1.
var ErrMigrationRisky = errors.New("the migration as written is risky")

// RehearseMigration is `rehearse migration`: the migration read
// statement by statement; with a source, rehearsed on a twin as written
// and in its safe form while the captured workload replays; the source's
// write counters compared before and after. It returns ErrMigrationRisky
// beside the report when the migration as written does what FailOn
// names.
func RehearseMigration(ctx context.Context, version string, o MigrationOptions) (*report.RehearsalReport, error) {
	m, err := migration.Read(o.File, o.Script)
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	rep := &report.RehearsalReport{PGMedic: version, Migration: m, FailOn: o.FailOn, MaxWaitMS: float64(o.MaxWait.Milliseconds())}
	if o.Source == "" && o.TwinDSN == "" {
		rep.Static = true
		return rep, verdict(rep)
	}
	var w *capture.Workload
	if len(o.Sources) > 0 {
		if w, err = capture.Read(ctx, o.Sources, capture.Options{Database: o.Database, Options: o.Read}); err != nil {
			return nil, diagnose.InputErr(err)
		}
		st := w.Stats()
		rep.Capture, rep.Logs = &st, o.Logs
		if len(w.Sessions) == 0 {
			return nil, diagnose.InputErrorf("the capture holds no session to replay (%d statements read): log with log_min_duration_statement = 0, log_connections and log_disconnections, or name the database with --database", w.Statements)
		}
	}
	dsn := o.TwinDSN
	var allow []string
	if o.Source != "" {
		before, err := writeCounters(ctx, o.Source, o.StatementTimeout)
		if err != nil {
			return nil, diagnose.InputErrorf("--source: %w", err)
		}
		queries := migrationQueries(m, w)
		src, err := ReplaySource(ctx, o.Source, queries, true, o.SourceOptions)
		if err != nil {
			return nil, diagnose.InputErrorf("--source: %w", err)
		}
		defer src.Twin.Close(context.WithoutCancel(ctx))
		src.Twin.Release(ctx)
		dsn, rep.Twin = src.Twin.DSN(), src.Twin.Summary()
		defer func() {
			after, err := writeCounters(context.WithoutCancel(ctx), o.Source, o.StatementTimeout)
			rep.Source = sourceWrites(before, after, err)
		}()
	}
	if o.TwinDSN != "" {
		// A scratch database the user named for this (staging, a branch):
		// the runs write only into copies of it.
		allow = append(allow, o.TwinDSN)
	}
	srv, err := replay.OpenServer(ctx, dsn)
	if err != nil {
		return nil, diagnose.InputErrorf("the twin: %w", err)
	}
	if err := srv.Guard(ctx, allow, o.Source); err != nil {
		return nil, diagnose.InputErr(err)
	}
	var users []string
	if w != nil {
		users = w.Users()
	}
	side, err := srv.Side(replay.SideOptions{Name: "twin", Users: users})
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	if !side.Fresh {
		return nil, diagnose.InputErrorf("the twin's server cannot copy the database for each run (%s): give the role CREATEDB on a database it owns, or leave out --twin-dsn", side.NoCopy)
	}
	ro := rehearse.Options{Workload: w, Side: side, MaxWait: o.MaxWait, Before: o.Before, After: o.Before / 2, StepTimeout: o.StepTimeout, Log: o.Log}
	o.logf("rehearsing %s as written (%d statements)", o.File, len(m.Statements))
	written, err := rehearse.Execute(ctx, rehearse.Written(m), 0, ro)
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	rep.Runs = append(rep.Runs, written)
	if rehearse.NeedsSafer(m, written) {
		r, err := o.rehearseSafer(ctx, m, written, dsn, ro)
		if err != nil {
			return nil, err
		}
		rep.Runs = append(rep.Runs, r)
	}
	return rep, verdict(rep)
}

// rehearseSafer rehearses the migration's safe form. Some changes' safe
// form needs the twin's catalog (a column's keys, default and indexes, to
// move it to a new one), read over a connection of its own.
func (o MigrationOptions) rehearseSafer(ctx context.Context, m *migration.Migration, written *rehearse.Run, dsn string, ro rehearse.Options) (*rehearse.Run, error) {
	facts := migration.Facts(nil)
	conn, err := envelope.Dial(ctx, dsn, envelope.Work{})
	if err == nil {
		facts = rehearse.Facts(ctx, conn)
	}
	safe := rehearse.Safer(m, written, o.MaxWait, facts)
	// Closed before the run: each run copies the twin's database, which
	// no other session may be connected to.
	if conn != nil {
		conn.Close(context.WithoutCancel(ctx))
	}
	o.logf("rehearsing its safe form (%d steps; %s)", len(safe.Steps), safe.Why)
	r, err := rehearse.Execute(ctx, safe, 1, ro)
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	return r, nil
}

// safeFails adds to a failing verdict what its safe form did not avoid:
// a step of it that failed or broke the application's statements (a
// column's changed type breaks prepared statements whichever way it is
// made), so that nobody takes the safe form for the cure of that.
func safeFails(rep *report.RehearsalReport) {
	if len(rep.Runs) < 2 {
		return
	}
	for i, s := range rep.Runs[1].Steps {
		if s.Verdict != rehearse.Failed {
			continue
		}
		if s.Error != "" {
			rep.Failing = append(rep.Failing, fmt.Sprintf("its safe form failed too: step %d: %s", i+1, s.Error))
		} else {
			rep.Failing = append(rep.Failing, fmt.Sprintf("its safe form broke the application's statements too: step %d: %s", i+1, s.Broke))
		}
		return
	}
}

// verdict sets the report's failing reasons from --fail-when.
func verdict(rep *report.RehearsalReport) error {
	on := func(name string) bool { return slices.Contains(rep.FailOn, name) }
	add := func(format string, args ...any) { rep.Failing = append(rep.Failing, fmt.Sprintf(format, args...)) }
	if rep.Static {
		for _, s := range rep.Migration.Statements {
			if on("queued") && (s.BlocksReads || s.BlocksWrites) {
				add("statement %d (line %d) takes %s on %s, which stops the application's %s while it is held or waited for (not rehearsed: give --source)", s.N, s.Line, s.Lock, s.Table.Name, stops(s))
			}
			if on("rewrite") && s.Rewrites == "always" {
				add("statement %d (line %d) rewrites %s", s.N, s.Line, s.Table.Name)
			}
		}
	} else if len(rep.Runs) > 0 {
		for _, s := range rep.Runs[0].Steps {
			switch {
			case on("failed") && s.Verdict == rehearse.Failed && s.Error == "":
				add("statement %d broke the application's statements: %s", s.Of, s.Broke)
			case on("failed") && s.Verdict == rehearse.Failed:
				add("statement %d failed: %s", s.Of, s.Error)
			case on("queued") && s.Verdict == rehearse.Queued:
				add("statement %d queued %d sessions of the application, the longest %.0f ms (--max-wait %.0f ms)", s.Of, s.Queued, s.QueuedMaxMS, rep.MaxWaitMS)
			}
			if on("rewrite") && s.Rewrote {
				add("statement %d rewrote its table (%.0f ms under %s)", s.Of, s.HeldMS, s.Lock)
			}
		}
	}
	if len(rep.Failing) > 0 {
		safeFails(rep)
		return ErrMigrationRisky
	}
	if why := rehearsalUnmeasured(rep); why != "" {
		rep.Inconclusive = why
		return fmt.Errorf("%w: %s", ErrRehearsalInconclusive, why)
	}
	return nil
}

// ErrRehearsalInconclusive is a rehearsal in which no call of the
// application overlapped the migration: it measured the migration alone,
// which says nothing of what it does to the application. Exit 2, with the
// report.
var ErrRehearsalInconclusive = errors.New("the rehearsal is inconclusive")

// rehearsalUnmeasured says why a rehearsal with a captured workload
// measured nothing of it: no call of the application overlapped the
// migration as written. "" when some did, or no workload was given.
func rehearsalUnmeasured(rep *report.RehearsalReport) string {
	if rep.Static || rep.Capture == nil || len(rep.Runs) == 0 {
		return ""
	}
	r := rep.Runs[0]
	if r.During.Calls > 0 {
		return ""
	}
	return fmt.Sprintf("no call of the application overlapped the migration as written (%d captured statements; %d calls replayed before it, %d after): its time, %.0f ms, is the migration's alone; capture a longer window of the application, or give --before a span inside the capture",
		rep.Capture.Statements, r.Before.Calls, r.After.Calls, r.MigrationMS)
}

func stops(s *migration.Statement) string {
	if s.BlocksReads {
		return "reads and writes"
	}
	return "writes"
}

// migrationQueries are the texts whose tables the twin copies: the
// migration's and the captured workload's.
func migrationQueries(m *migration.Migration, w *capture.Workload) []string {
	var qs []string
	for _, s := range m.Statements {
		qs = append(qs, s.SQL)
	}
	if w != nil {
		for _, sh := range w.Shapes {
			qs = append(qs, sh.Query)
		}
	}
	return qs
}

// counters are a database's rows written, as pg_stat_database counts
// them for every session.
type counters struct{ inserted, updated, deleted int64 }

// writeCounters reads the source's write counters over pgmedic's
// read-only session.
func writeCounters(ctx context.Context, dsn string, timeout time.Duration) (counters, error) {
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: timeout})
	if err != nil {
		return counters{}, err
	}
	defer sess.Close()
	var c counters
	err = sess.Conn.QueryRow(ctx, envelope.Tag+` SELECT tup_inserted, tup_updated, tup_deleted FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.inserted, &c.updated, &c.deleted)
	if err != nil {
		return counters{}, fmt.Errorf("reading pg_stat_database: %s", envelope.Message(err))
	}
	return c, nil
}

// sourceWrites says whether the source's rows changed while pgmedic
// rehearsed (pgmedic's session there is read-only; another session's
// writes would show too, and are said as such).
func sourceWrites(before, after counters, err error) string {
	if err != nil {
		return "the source's write counters could not be read again: " + err.Error()
	}
	d := counters{after.inserted - before.inserted, after.updated - before.updated, after.deleted - before.deleted}
	if d == (counters{}) {
		return fmt.Sprintf("not written: rows inserted, updated and deleted in its database (pg_stat_database) %d, %d and %d before and after", before.inserted, before.updated, before.deleted)
	}
	return strings.TrimSpace(fmt.Sprintf("its write counters moved while pgmedic rehearsed: %d inserted, %d updated, %d deleted, by other sessions (pgmedic's session there is read-only)", d.inserted, d.updated, d.deleted))
}
