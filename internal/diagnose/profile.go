package diagnose

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// checkProfile samples the busiest backends' CPU with perf for
// o.ProfileFor (check --profile) and names the hot spots. perf that is
// missing or not allowed, or a server on another machine, costs a skip
// that says why; the check goes on without profiles.
func (o Options) checkProfile(ctx context.Context, sess *envelope.Session) ([]model.Finding, []model.Skip, *report.ProfileReport) {
	if o.ProfileFor <= 0 {
		return nil, nil, nil
	}
	skip := func(reason string) ([]model.Finding, []model.Skip, *report.ProfileReport) {
		return nil, []model.Skip{{Rule: rules.CPUHotspotID, Reason: "no CPU profile: " + reason,
			Fix: "run check on the database server as root (or with kernel.perf_event_paranoid <= 1) with linux-perf installed, or pgmedic profile there"}}, nil
	}
	perf, err := profile.FindPerf(ctx)
	if err != nil {
		return skip(err.Error())
	}
	pids, err := profile.Backends(ctx, sess.Conn, profile.Select{Busiest: 4})
	if err != nil {
		return skip(err.Error())
	}
	o.logf("profiling backends %v for %s", pids, o.ProfileFor)
	res, found, err := Profile(ctx, perf, sess, pids, o.ProfileFor, 499, o)
	if err != nil {
		return skip(err.Error())
	}
	rep, err := ProfileReport("", res.Profile, found, nil, model.Info)
	if err != nil {
		return skip(err.Error())
	}
	return found, nil, rep
}

// ProfileReport builds a profile's report: the folded stacks, the flame
// graph drawn from them, and the share of each kind of hot spot.
func ProfileReport(version string, p model.Profile, findings []model.Finding, skipped []model.Skip, least model.Severity) (*report.ProfileReport, error) {
	folded := profile.Folded(p)
	var svg strings.Builder
	if err := profile.FlameSVG(&svg, "CPU of "+p.Target, folded); err != nil {
		return nil, fmt.Errorf("drawing the flame graph: %w", err)
	}
	var kinds []report.KindRow
	for _, k := range rules.ProfileShares(p) {
		kinds = append(kinds, report.KindRow{ID: k.Kind.ID, Name: k.Kind.Name, Samples: k.Samples, Share: k.Share, Frames: k.Frames[:min(3, len(k.Frames))]})
	}
	in := report.ProfileInput{Profile: p, Folded: folded, FlameSVG: svg.String(), Kinds: kinds, FrameName: profile.FrameName}
	return report.NewProfile(version, in, findings, skipped, least), nil
}

// Profile samples the processes' CPU with perf for d at freq samples a
// second, names the hot spots (the rules among o.Rules that read a
// profile) and, with a session and unless o.NoVerify, re-runs each hot
// spot's statement with its fix. It is the one profile pipeline of
// check --profile and pgmedic profile; sess is nil when only --pid was
// given, and then nothing is attributed to statements or re-run.
func Profile(ctx context.Context, perf *profile.Perf, sess *envelope.Session, pids []int, d time.Duration, freq int, o Options) (profile.Result, []model.Finding, error) {
	var conn envelope.Conn
	if sess != nil {
		conn = sess.Conn
	}
	res, err := profile.Run(ctx, perf, conn, pids, d, freq)
	if err != nil {
		return res, nil, err
	}
	found, err := rules.RunProfile(res.Profile, o.Rules)
	if err != nil {
		return res, nil, inputErrf("--rules: %v", err)
	}
	if sess != nil && !o.NoVerify {
		for i := range found {
			proveHotspot(ctx, perf, sess, &found[i], res.Raw, o.logf)
		}
	}
	return res, found, nil
}

// proveHotspot re-runs a hot spot's statement as the application ran it
// and with the fix, in pgmedic's own session (read-only transactions that
// are rolled back), while perf records that session; the finding gets
// both times and both shares, or the reason no re-run was possible.
func proveHotspot(ctx context.Context, perf *profile.Perf, sess *envelope.Session, f *model.Finding, raw map[string]string, logf func(string, ...any)) {
	kind := rules.HotspotKind(*f)
	if kind == "" || f.Object.QueryID == "" {
		return
	}
	if busy := serverBusy(ctx, sess); busy != "" {
		f.Verification.Reason = busy
		return
	}
	columns := func(ctx context.Context, rel sqlparse.Name, typ string) ([]string, error) {
		name := sqlparse.QuoteIdent(rel.Name)
		if rel.Schema != "" {
			name = sqlparse.QuoteIdent(rel.Schema) + "." + name
		}
		rows, err := sess.Conn.Query(ctx, envelope.Tag+`SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND atttypid = $2::regtype AND attnum > 0 AND NOT attisdropped`, name, typ)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	exp, why := profile.Plan(ctx, kind, raw[f.Object.QueryID], columns)
	if exp == nil {
		f.Verification.Reason = why
		return
	}
	logf("re-running statement %s with %s", f.Object.QueryID, exp.Change)
	before, after, err := profile.Measure(ctx, perf, sess.Conn, exp, 2*time.Second, rules.HotspotShare(kind))
	if err != nil {
		f.Verification.Reason = "the re-run failed: " + err.Error()
		return
	}
	method := "perf on pgmedic's own session while it re-ran the statement as the application did and with " + exp.Change + " (read-only transactions, rolled back)"
	rules.ProveHotspot(f, method, before.Runs, after.Runs, before.MedianMS, after.MedianMS, before.Share, after.Share)
	if exp.Fixed != "" && f.Verification.Status == model.Confirmed {
		f.Fix.SQL = exp.Fixed
	}
}

// serverBusy applies the envelope's load rule before a re-run: none when
// active backends exceed twice the cores (perf runs on the server, so its
// cores are this machine's) or connections are near max_connections.
func serverBusy(ctx context.Context, sess *envelope.Session) string {
	a, err := collect.Load(ctx, sess.Conn)
	if err != nil {
		return "not re-run: the load could not be read (" + envelope.Message(err) + ")"
	}
	if why := verify.Busy(a.Active, a.Total, a.MaxConnections, runtime.NumCPU()); why != "" {
		return "not re-run: " + why
	}
	return ""
}
