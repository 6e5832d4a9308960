package diagnose

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/profile"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
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
	res, found, err := Profile(ctx, perf, sess.Conn, pids, o.ProfileFor, 499, ProfileRules{Rules: o.Rules, NoVerify: o.NoVerify, Log: o.Log})
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

// Profile samples the processes' CPU for d at freq samples a second,
// names the hot spots (the rules among o.Rules that read a profile) and,
// given pgmedic's connection and unless o.NoVerify, re-runs each hot
// spot's statement with its fix through verify, under the envelope's one
// load rule. It is the one profile pipeline of check --profile and
// pgmedic profile; conn is nil when only --pid was given, and then
// nothing is attributed to statements or re-run.
func Profile(ctx context.Context, cpu profile.CPU, conn envelope.Conn, pids []int, d time.Duration, freq int, o ProfileRules) (profile.Result, []model.Finding, error) {
	res, err := profile.Run(ctx, cpu, conn, pids, d, freq)
	if err != nil {
		return res, nil, err
	}
	found, err := rules.RunProfile(res.Profile, o.Rules)
	if err != nil {
		return res, nil, InputErrorf("--rules: %v", err)
	}
	if conn == nil || o.NoVerify {
		return res, found, nil
	}
	// The experiments see the load now and the statements' texts as
	// pg_stat_activity showed them while perf recorded.
	snap := &model.Snapshot{Literals: map[int64]string{}}
	for id, q := range res.Raw {
		if qid, err := strconv.ParseInt(id, 10, 64); err == nil {
			snap.Literals[qid] = q
		}
	}
	if snap.Activity, err = collect.Load(ctx, conn); err != nil {
		for i := range found {
			if found[i].Experiment != nil {
				found[i].Verification = model.NotRunBecause("not re-run: the load could not be read (" + envelope.Message(err) + ")")
			}
		}
		return res, found, nil
	}
	// perf samples local processes only, so the server's cores are this
	// machine's.
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	eng := &verify.Engine{Conn: conn, Cores: runtime.NumCPU(), CPU: cpu, Log: logf}
	found, _ = eng.Run(ctx, snap, found)
	return res, found, nil
}

// ProfileRules are what a profile's pipeline reads besides the samples:
// the rules to run on them, whether to re-run a hot spot's statement with
// its fix, and where progress goes.
type ProfileRules struct {
	Rules    []string
	NoVerify bool
	Log      func(format string, args ...any)
}

// ProfileOptions are `profile`'s: the server (DSN, or none with PIDs
// alone), which backends, how long and how often.
type ProfileOptions struct {
	ProfileRules
	DSN       string
	HasDSN    bool
	Select    profile.Select
	Duration  time.Duration
	Frequency int
}

// ProfileCommand is `pgmedic profile`: perf found, the backends picked
// (in pg_stat_activity unless only PIDs are given), sampled, the hot
// spots named and re-run with their fix. It returns the report and the
// profile it drew, for the exports.
func ProfileCommand(ctx context.Context, version string, o ProfileOptions, least model.Severity) (*report.ProfileReport, model.Profile, error) {
	perf, err := profile.FindPerf(ctx)
	if err != nil {
		return nil, model.Profile{}, InputErr(err)
	}
	var conn envelope.Conn
	var targets []int
	if !o.HasDSN && len(o.Select.PIDs) > 0 {
		if targets, err = profile.Backends(ctx, nil, o.Select); err != nil {
			return nil, model.Profile{}, InputErr(err)
		}
	} else {
		sess, err := envelope.Connect(ctx, o.DSN, envelope.Options{})
		if err != nil {
			return nil, model.Profile{}, err
		}
		defer sess.Close()
		conn = sess.Conn
		if targets, err = profile.Backends(ctx, conn, o.Select); err != nil {
			return nil, model.Profile{}, InputErr(err)
		}
	}
	if o.Log != nil {
		o.Log("profiling %v for %s", targets, o.Duration)
	}
	res, findings, err := Profile(ctx, perf, conn, targets, o.Duration, o.Frequency, o.ProfileRules)
	if err != nil {
		return nil, model.Profile{}, InputErr(err)
	}
	if res.Profile.Samples == 0 {
		return nil, model.Profile{}, InputErrorf("perf took no sample of %v in %s: the processes did not run on a CPU (idle)", targets, o.Duration)
	}
	rep, err := ProfileReport(version, res.Profile, findings, nil, least)
	if err != nil {
		return nil, model.Profile{}, InputErr(err)
	}
	rep.Unread = res.Stats.Unrecognised
	return rep, res.Profile, nil
}
