package trial

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/twin"
)

// UpgradeOptions are `rehearse upgrade`'s.
type UpgradeOptions struct {
	SourceOptions
	// Timeline keeps every replayed call's time and latency, for the
	// HTML report's picture of each shape over the replay.
	Timeline bool
	// Source is the server to upgrade (read only); To the major to
	// upgrade it to.
	Source string
	To     int
	// The captured workload.
	Logs     []string
	Sources  []logs.Source
	Read     logs.Options
	Database string
	// Runs are the replays of each side; MinRatio the slowdown (at the
	// lower end of its interval) that makes a shape fail the upgrade.
	Runs     int
	MinRatio float64
	Speed    float64
}

// ErrUpgradeSlower is an upgrade that made a statement shape slower, or
// failed one the old major ran: exit 1.
var ErrUpgradeSlower = errors.New("the upgrade made the workload slower")

// RehearseUpgrade is `rehearse upgrade`: twins of the source on its own
// major and on the target major, with the same tables and rows and the
// settings the source sets; the settings the upgrade changes; the
// captured workload replayed on both with replay's verdict per statement
// shape and each shape's plan on both; and for each shape that got
// slower, its cause measured (the same statements on the new major with
// the old behaviour put back).
func RehearseUpgrade(ctx context.Context, version string, o UpgradeOptions) (*report.UpgradeReport, error) {
	if _, err := lab.FindServer("", o.To); err != nil {
		return nil, diagnose.InputErrorf("--to %d: %v", o.To, err)
	}
	w, err := capture.Read(ctx, o.Sources, capture.Options{Database: o.Database, Options: o.Read})
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	if len(w.Sessions) == 0 {
		return nil, diagnose.InputErrorf("the capture holds no session to replay (%d statements read): log with log_min_duration_statement = 0, log_connections and log_disconnections, or name the database with --database", w.Statements)
	}
	st := w.Stats()
	rep := &report.UpgradeReport{PGMedic: version, Logs: o.Logs, Capture: st, MinRatio: o.MinRatio}
	before, err := writeCounters(ctx, o.Source, o.StatementTimeout)
	if err != nil {
		return nil, diagnose.InputErrorf("--source: %w", err)
	}
	srcServer, err := sourceServer(ctx, o.Source, o.StatementTimeout)
	if err != nil {
		return nil, diagnose.InputErrorf("--source: %w", err)
	}
	from := pgversion.Major(srcServer.VersionNum)
	if o.To <= from {
		return nil, diagnose.InputErrorf("--to %d: the source runs PostgreSQL %d; give a later major to rehearse an upgrade to", o.To, from)
	}
	var queries []string
	for _, sh := range w.Shapes {
		queries = append(queries, sh.Query)
	}
	// Both twins take the settings the source sets, not its binary's
	// defaults: an upgrade keeps postgresql.conf, and takes the new
	// binary's defaults for the rest.
	base := twin.Options{MaxBytes: o.TwinMaxBytes, CopyTimeout: o.CopyTimeout, Log: o.Log, SetOnly: true}
	old, upgraded := base, base
	upgraded.Major = o.To
	_, tws, err := sourceTwins(ctx, o.Source, queries, o.SourceOptions, old, upgraded)
	if err != nil {
		return nil, diagnose.InputErrorf("--source: %w", err)
	}
	for _, tw := range tws {
		defer tw.Close(context.WithoutCancel(ctx))
	}
	defer func() {
		after, err := writeCounters(context.WithoutCancel(ctx), o.Source, o.StatementTimeout)
		rep.Source = sourceWrites(before, after, err)
	}()
	var servers [2]*rehearse.Server
	for i, tw := range tws {
		if servers[i], err = rehearse.ReadServer(ctx, tw.Conn.PgConn()); err != nil {
			return nil, diagnose.InputErrorf("the twin: %w", err)
		}
		o.logf("twin %d: PostgreSQL %s, jit = %s, JIT compiles here: %v", i+1, servers[i].Version, servers[i].Settings["jit"].Value, servers[i].JIT)
		tw.Release(ctx)
	}
	rep.Twins = []string{tws[0].Summary(), tws[1].Summary()}
	rep.From, rep.To = servers[0].Version, servers[1].Version
	rep.Settings = rehearse.Changes(srcServer.Settings, servers[0], servers[1])

	sides, err := upgradeSides(ctx, tws, servers, w)
	if err != nil {
		return nil, err
	}
	ro := replay.Options{Speed: o.Speed, Timeout: w.Duration + 5*time.Minute, Timeline: o.Timeline}
	o.logf("replaying %d sessions, %d statements: %d runs on PostgreSQL %s and on %s, alternating", len(w.Sessions), w.Statements, o.Runs, rep.From, rep.To)
	cmp, err := replay.Compare(ctx, w, sides[0], sides[1], o.Runs, ro)
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	rep.Comparison = cmp
	if err := o.explainShapes(ctx, w, tws, rep); err != nil {
		return nil, err
	}
	rep.Failing = upgradeFailing(rep, o.MinRatio)
	if len(rep.Failing) > 0 {
		return rep, ErrUpgradeSlower
	}
	return rep, nil
}

// upgradeSides are the two twins as the sides of a replay: the old major's
// and the new one's.
func upgradeSides(ctx context.Context, tws []*twin.Twin, servers [2]*rehearse.Server, w *capture.Workload) ([2]replay.Side, error) {
	var sides [2]replay.Side
	for i, tw := range tws {
		srv, err := replay.OpenServer(ctx, tw.DSN())
		if err != nil {
			return sides, diagnose.InputErrorf("the twin: %w", err)
		}
		if sides[i], err = srv.Side(replay.SideOptions{Name: "PostgreSQL " + servers[i].Version, Users: w.Users()}); err != nil {
			return sides, diagnose.InputErr(err)
		}
	}
	return sides, nil
}

// upgradeFailing says why the upgrade fails, a line a statement shape:
// slower on the new major by minRatio at the lower end of its interval
// (with the setting that causes it, when one does), or failing only there.
func upgradeFailing(rep *report.UpgradeReport, minRatio float64) []string {
	var out []string
	for _, s := range rep.Shapes {
		switch {
		case s.Slower(minRatio):
			why := fmt.Sprintf("%s is %.1fx slower on PostgreSQL %s (median %.2f -> %.2f ms, interval %.2f-%.2f)", printable.Clip(s.Query, 100), s.Change.Ratio.Value, rep.To, s.Change.A.Value, s.Change.B.Value, s.Change.Ratio.Low, s.Change.Ratio.High)
			if s.Cause != nil && s.Cause.Explains {
				why += fmt.Sprintf(": because of %s, fixed by %s", s.Cause.Setting, s.Cause.Toggle)
			}
			out = append(out, why)
		case s.Change.BErrors > 0 && s.Change.AErrors == 0:
			out = append(out, fmt.Sprintf("%s failed %d times on PostgreSQL %s and never on %s", printable.Clip(s.Query, 100), s.Change.BErrors, rep.To, rep.From))
		}
	}
	return out
}

// sourceFacts are the source's settings and version.
type sourceFacts struct {
	Settings   *rehearse.Server
	VersionNum int
}

// sourceServer reads the source's settings and version over pgmedic's
// read-only session.
func sourceServer(ctx context.Context, dsn string, timeout time.Duration) (sourceFacts, error) {
	var out sourceFacts
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: timeout})
	if err != nil {
		return out, err
	}
	defer sess.Close()
	if out.Settings, err = rehearse.ReadServer(ctx, sess.Conn.PgConn()); err != nil {
		return out, err
	}
	err = sess.Conn.QueryRow(ctx, envelope.Tag+"SELECT current_setting('server_version_num')::int").Scan(&out.VersionNum)
	return out, err
}

// explainShapes plans each replayed shape on both majors (a sample
// statement of it, with its values) and, for each shape slower on the
// new one, measures its cause.
func (o *UpgradeOptions) explainShapes(ctx context.Context, w *capture.Workload, tws []*twin.Twin, rep *report.UpgradeReport) error {
	index := map[string]int32{}
	for i, sh := range w.Shapes {
		index[sh.Fingerprint] = int32(i)
	}
	var conns [2]*pgconn.PgConn
	for i, tw := range tws {
		c, err := envelope.Dial(ctx, tw.DSN(), envelope.Work{})
		if err != nil {
			return diagnose.InputErrorf("connecting to the twin: %s", envelope.Message(err))
		}
		defer c.Close(context.WithoutCancel(ctx))
		conns[i] = c.PgConn()
	}
	for i, ch := range rep.Comparison.Shapes {
		if i == 20 {
			break
		}
		s := &rehearse.UpgradeShape{Query: ch.Query, Change: ch}
		rep.Shapes = append(rep.Shapes, s)
		shape, ok := index[ch.Fingerprint]
		if !ok {
			continue
		}
		sample := rehearse.Samples(w, shape, 2)
		if len(sample) == 0 {
			s.CauseError = "no captured statement of this shape succeeded, so there is none to time on each major"
			continue
		}
		s.PlanOld, _ = rehearse.PlanShape(ctx, conns[0], sample[0])
		s.PlanNew, _ = rehearse.PlanShape(ctx, conns[1], sample[0])
		if !s.Slower(o.MinRatio) && ch.Verdict != replay.Slower {
			continue
		}
		o.logf("finding why %s is slower", printable.Clip(ch.Query, 80))
		cause, err := rehearse.FindCause(ctx, conns[0], conns[1], sample, rep.Settings)
		if err != nil {
			s.CauseError = err.Error()
			continue
		}
		s.Cause = cause
	}
	slices.SortStableFunc(rep.Shapes, func(a, b *rehearse.UpgradeShape) int {
		return boolRank(b.Slower(o.MinRatio)) - boolRank(a.Slower(o.MinRatio))
	})
	return nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
