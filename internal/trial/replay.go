package trial

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/replay"
	"github.com/pgmedic/pgmedic/internal/report"
)

// ReplayOptions are `replay`'s.
type ReplayOptions struct {
	SourceOptions
	// Timeline keeps every call's send time and latency, for the HTML
	// report's picture of each shape over the replay (memory grows with
	// the capture, so only when that report is asked for).
	Timeline bool
	// Logs are the captured logs (their names for the report) and Sources
	// what reads them; Read how (format, prefix) and which database.
	Logs     []string
	Sources  []logs.Source
	Read     logs.Options
	Database string
	// DSN is side A's server; Candidate side B's when B is another
	// server; Source the server the log came from (never written to
	// unless Allow names it).
	DSN, Candidate, Source string
	Allow                  []string
	DryRun                 bool
	// BuildTwin replays against a twin of Source; Fix gives side B the
	// fix of one of Source's findings.
	BuildTwin bool
	Fix       string
	// What side B changes: statements applied to its copy, settings for
	// its sessions, a pool in front of it (PoolA for side A).
	Apply       []string
	Settings    map[string]string
	Pool, PoolA int
	// The replay's pace and bounds.
	Speed          float64
	Runs           int
	MaxConnections int
	ClientTimeout  time.Duration
	Timeout        time.Duration
	NoPrepare      bool
}

// ErrSlower is a replay whose change made the workload slower: exit 1.
var ErrSlower = errors.New("the change made the replay slower")

// ErrInconclusive is a replay that did not replay all of the workload
// (sessions that could not connect, statements not sent): the report says
// how many and why, and the run exits 2, since nothing it did not send
// can be judged.
var ErrInconclusive = errors.New("the replay is inconclusive: part of the workload was not replayed (see the report)")

// Inconclusive says err is a run that could not conclude and wrote its
// report saying why: a replay that did not send all of the workload, a
// rehearsal that no call of the application overlapped.
func Inconclusive(err error) bool {
	return errors.Is(err, ErrInconclusive) || errors.Is(err, ErrRehearsalInconclusive)
}

// Replay is `replay`: the capture read, then a dry run, one replay, or an
// A/B comparison with a verdict. It returns ErrSlower beside the report
// when B was slower.
func Replay(ctx context.Context, version string, o ReplayOptions) (*report.ReplayReport, error) {
	w, err := capture.Read(ctx, o.Sources, capture.Options{Database: o.Database, Options: o.Read})
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	rep := &report.ReplayReport{PGMedic: version, Logs: o.Logs, Capture: w.Stats(), Speed: o.Speed}
	if o.DryRun {
		rep.DryRun = true
		return rep, nil
	}
	settings := maps.Clone(o.Settings)
	if settings == nil {
		settings = map[string]string{}
	}
	if o.BuildTwin || o.Fix != "" {
		closeTwin, err := o.fromSource(ctx, w, rep, settings)
		if err != nil {
			return nil, err
		}
		defer closeTwin()
	}
	change := o.Candidate != "" || len(o.Apply) > 0 || len(settings) > 0 || o.Pool > 0
	a, err := replay.OpenServer(ctx, o.DSN)
	if err != nil {
		return nil, diagnose.InputErrorf("--dsn: %w", err)
	}
	if err := a.Guard(ctx, o.Allow, o.Source); err != nil {
		return nil, diagnose.InputErr(err)
	}
	ro := replay.Options{Speed: o.Speed, MaxConnections: o.MaxConnections, StatementTimeout: o.ClientTimeout, Timeout: o.Timeout, NoPrepare: o.NoPrepare, Timeline: o.Timeline}
	if ro.Timeout == 0 {
		ro.Timeout = 5 * time.Minute
		if o.Speed > 0 {
			ro.Timeout += time.Duration(float64(w.Duration) / o.Speed)
		} else {
			ro.Timeout += w.Duration
		}
	}
	users := w.Users()
	sideA, err := a.Side(replay.SideOptions{Name: "as is", Pool: o.PoolA, Users: users})
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	if o.PoolA > 0 {
		sideA.Name = fmt.Sprintf("pool of %d", o.PoolA)
	}
	if !change {
		return rep, o.replayOnce(ctx, w, a, sideA, ro, rep)
	}
	bServer := a
	if o.Candidate != "" {
		if bServer, err = replay.OpenServer(ctx, o.Candidate); err != nil {
			return nil, diagnose.InputErrorf("--candidate: %w", err)
		}
		if err := bServer.Guard(ctx, o.Allow, o.Source); err != nil {
			return nil, diagnose.InputErrorf("--candidate: %w", err)
		}
	}
	sideB, err := bServer.Side(replay.SideOptions{Name: changeName(o.Candidate != "", o.Apply, settings, o.Pool), Apply: o.Apply, Settings: settings, Pool: o.Pool, Users: users})
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	o.logf("replaying %d sessions, %d statements at speed %g: %d runs of %q and of %q, alternating", len(w.Sessions), w.Statements, o.Speed, o.Runs, sideA.Name, sideB.Name)
	c, err := replay.Compare(ctx, w, sideA, sideB, o.Runs, ro)
	if err != nil {
		return nil, diagnose.InputErr(err)
	}
	rep.Comparison = c
	switch c.Verdict {
	case replay.Slower:
		return rep, ErrSlower
	case replay.Inconclusive:
		return rep, fmt.Errorf("%w: %s", ErrInconclusive, strings.Join(c.Why[1:], "; "))
	}
	return rep, nil
}

// fromSource reads --source: with --twin, a twin of it becomes side A's
// server; with --fix, side B gets that finding's change. It returns what
// closes the twin.
func (o *ReplayOptions) fromSource(ctx context.Context, w *capture.Workload, rep *report.ReplayReport, settings map[string]string) (func(), error) {
	closeTwin := func() {}
	var queries []string
	for _, sh := range w.Shapes {
		queries = append(queries, sh.Query)
	}
	src, err := ReplaySource(ctx, o.Source, queries, o.BuildTwin, o.SourceOptions)
	if err != nil {
		return closeTwin, diagnose.InputErrorf("--source: %w", err)
	}
	if src.Twin != nil {
		closeTwin = func() { src.Twin.Close(context.WithoutCancel(ctx)) }
		src.Twin.Release(ctx)
		o.DSN, rep.Twin = src.Twin.DSN(), src.Twin.Summary()
	}
	if o.Fix == "" {
		return closeTwin, nil
	}
	fd, err := findingByID(src.Findings, o.Fix)
	if err != nil {
		closeTwin()
		return func() {}, diagnose.InputErr(err)
	}
	ch, err := replay.ChangeOf(fd)
	if err != nil {
		closeTwin()
		return func() {}, diagnose.InputErr(err)
	}
	o.Apply = append(o.Apply, ch.B.Apply...)
	for k, v := range ch.B.Settings {
		settings[k] = v
	}
	if ch.B.Pool > 0 && o.Pool == 0 {
		o.Pool = ch.B.Pool
	}
	if ch.PoolA > 0 && o.PoolA == 0 {
		o.PoolA = ch.PoolA
	}
	rep.Fix = fd.ID + ": " + fd.Title + " (replayed: " + ch.Said + ")"
	return closeTwin, nil
}

// replayOnce replays the capture once on side A, with no change to
// compare.
func (o *ReplayOptions) replayOnce(ctx context.Context, w *capture.Workload, a *replay.Server, sideA replay.Side, ro replay.Options, rep *report.ReplayReport) error {
	o.logf("replaying %d sessions, %d statements at speed %g on %s", len(w.Sessions), w.Statements, o.Speed, a.Name)
	t, err := sideA.Open(ctx, 0)
	if err != nil {
		return diagnose.InputErr(err)
	}
	one := ro
	one.Connect, one.NoPrepare = t.Connect, o.NoPrepare || t.NoPrepare
	one.LockWaits = &replay.LockSampler{Connect: t.ConnectAdmin}
	r, err := replay.Run(ctx, w, one)
	t.Close()
	if err != nil {
		return diagnose.InputErr(err)
	}
	if ctx.Err() != nil {
		return diagnose.InputErrorf("interrupted: every session was stopped and its connection closed")
	}
	rep.Where, rep.Single = t.Where, r
	if r.ConnectFailed > 0 || r.NotRun > 0 {
		why := fmt.Sprintf("%d of %d sessions could not connect and %d of %d statements were not sent", r.ConnectFailed, len(w.Sessions), r.NotRun, w.Statements)
		if len(r.ConnectErrors) > 0 {
			why += " (" + r.ConnectErrors[0] + ")"
		}
		return fmt.Errorf("%w: %s", ErrInconclusive, why)
	}
	return nil
}

// findingByID is the finding an id names, or the one finding of a rule.
func findingByID(fs []model.Finding, id string) (model.Finding, error) {
	var ofRule []model.Finding
	var ids []string
	for _, f := range fs {
		if f.ID == id {
			return f, nil
		}
		if f.Rule == id {
			ofRule = append(ofRule, f)
		}
		ids = append(ids, f.ID)
	}
	if len(ofRule) == 1 {
		return ofRule[0], nil
	}
	if len(ofRule) > 1 {
		var names []string
		for _, f := range ofRule {
			names = append(names, f.ID)
		}
		return model.Finding{}, fmt.Errorf("--fix %s: %d findings have that rule (%s): give one id", id, len(ofRule), strings.Join(names, ", "))
	}
	if len(ids) == 0 {
		return model.Finding{}, fmt.Errorf("--fix %s: the source has no finding to take a fix from", id)
	}
	return model.Finding{}, fmt.Errorf("--fix %s: no such finding on the source; its findings: %s", id, strings.Join(ids, ", "))
}

// changeName says what side B changes, the same way on every run: the
// settings in name order (a map's order changes from run to run).
func changeName(candidate bool, apply []string, settings map[string]string, pool int) string {
	var parts []string
	if candidate {
		parts = append(parts, "candidate server")
	}
	for _, s := range apply {
		parts = append(parts, strings.Join(strings.Fields(s), " "))
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		parts = append(parts, k+" = "+settings[k])
	}
	if pool > 0 {
		parts = append(parts, fmt.Sprintf("pool of %d", pool))
	}
	return strings.Join(parts, "; ")
}
