package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/trial"
)

// rehearseScenario runs a rehearsal scenario: the workload captured from
// the server's log, then `rehearse migration` of the migration as
// written (it must be found risky, and with pgmedic's safe form of it
// the application's longest wait behind a lock must be MinRatio times
// shorter) and of the team's safe version (it must pass).
func rehearseScenario(ctx context.Context, c *lab.Cluster, s Scenario, version string, o diagnose.Options) (*Result, error) {
	env, err := Setup(ctx, c, s, o.Log)
	if err != nil {
		return nil, &diagnose.InputError{Err: err}
	}
	captures, err := captureWorkload(ctx, c, env, s)
	if err != nil {
		return nil, &diagnose.InputError{Err: err}
	}
	res := &Result{Scenario: s.Name, Expected: []Expect{}, MustNot: []Expect{}}
	if s.Rehearse.To != 0 {
		return res, rehearseUpgrade(ctx, c, env, s, version, o, captures, res)
	}
	// Each file is rehearsed from a capture in another of the server's log
	// formats, when it writes more than one.
	runs := 0
	run := func(name string, script []byte) (*report.RehearsalReport, bool, error) {
		capture := captures[runs%len(captures)]
		runs++
		rep, err := trial.RehearseMigration(ctx, version, trial.MigrationOptions{
			SourceOptions: trial.SourceOptions{Log: o.Log, StatementTimeout: o.StatementTimeout},
			File:          name, Script: script, Source: c.DSN(env.DB),
			Logs: []string{"the server's " + formatOf(capture)}, Sources: []logs.Source{logs.FileSource(capture, nil)}, Database: env.DB,
			MaxWait: 200 * time.Millisecond, Before: time.Second, StepTimeout: time.Minute, FailOn: []string{"queued", "failed"}})
		risky := errors.Is(err, trial.ErrMigrationRisky)
		if err != nil && !risky {
			return nil, false, err
		}
		res.Rehearsals = append(res.Rehearsals, rep)
		return rep, risky, nil
	}
	written, risky, err := run(s.Rehearse.Migration, s.Rehearse.MigrationSQL)
	if err != nil {
		return nil, err
	}
	if !risky {
		res.Missing = append(res.Missing, s.Rehearse.Migration+" found risky as written (exit 1)")
	}
	if len(written.Runs) < 2 {
		res.Missing = append(res.Missing, s.Rehearse.Migration+": its safe form rehearsed")
	} else {
		as, safe := written.Runs[0], written.Runs[1]
		res.Record("p99_before_ms", as.Before.P99)
		res.Record("p99_as_written_ms", as.During.P99)
		res.Record("p99_safe_form_ms", safe.During.P99)
		if safe.Worst() != rehearse.OK {
			res.Unexpected = append(res.Unexpected, fmt.Sprintf("pgmedic's safe form of %s: %s", s.Rehearse.Migration, safe.Worst()))
		}
		// The readers: the statement the application sends most. Their
		// p99 shows the harm, but a machine that stalls for a moment
		// raises it in either run; the verdict is on how long the
		// application's sessions queued behind the migration's locks, as
		// the lock monitor saw them (to its poll, PollEvery), which a slow
		// machine does not lengthen.
		readersAs, readersSafe := as.Busiest(), safe.Busiest()
		res.Record("readers_p99_as_written_ms", readersAs.During.P99)
		res.Record("readers_p99_safe_form_ms", readersSafe.During.P99)
		queuedAs, queuedSafe := as.QueuedMaxMS(), safe.QueuedMaxMS()
		res.Record("queued_max_as_written_ms", queuedAs)
		res.Record("queued_max_safe_form_ms", queuedSafe)
		if queuedAs < s.Rehearse.MinRatio*max(queuedSafe, float64(rehearse.PollEvery.Milliseconds())) {
			res.Missing = append(res.Missing, fmt.Sprintf("the application's longest wait behind a lock as written (%.0f ms) at least %.0fx that with the safe form (%.0f ms)", queuedAs, s.Rehearse.MinRatio, queuedSafe))
		}
	}
	safeRep, risky, err := run(s.Rehearse.Safe, s.Rehearse.SafeSQL)
	if err != nil {
		return nil, err
	}
	if risky {
		res.Unexpected = append(res.Unexpected, s.Rehearse.Safe+" found risky: "+fmt.Sprint(safeRep.Failing))
	}
	if len(safeRep.Runs) > 0 {
		res.Record("p99_safe_sql_ms", safeRep.Runs[0].During.P99)
	}
	return res, nil
}

// Record stores one measured figure of the scenario.
func (r *Result) Record(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = model.Round(v, 1)
}

// captureWorkload runs the scenario's workload for its capture window on
// a cluster that logs every statement, and writes what the server logged
// meanwhile to files beside the cluster, once the server has logged every
// session's end: one per log file the server writes (server.log when the
// server logs to stderr, and each of the logging collector's files, such
// as a csvlog beside the stderr one). They hold the same workload, each
// in its format.
func captureWorkload(ctx context.Context, c *lab.Cluster, env *Env, s Scenario) ([]string, error) {
	logFiles := func() []string {
		files, _ := filepath.Glob(filepath.Join(c.Dir, "data", "log", "*"))
		return append(files, filepath.Join(c.Dir, "server.log"))
	}
	from := map[string]int64{}
	for _, f := range logFiles() {
		from[f] = fileSize(f)
	}
	d, _ := time.ParseDuration(s.Rehearse.Capture) // load checked it
	wctx, stop := context.WithTimeout(ctx, d)
	defer stop()
	if err := env.Run(wctx, s); err != nil && wctx.Err() == nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var parts []string
		complete := true
		for i, f := range logFiles() {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("reading the server's log: %w", err)
			}
			b = b[min(int64(len(b)), from[f]):]
			opened, closed := bytes.Count(b, []byte("connection authorized: ")), bytes.Count(b, []byte("disconnection: "))
			if opened == 0 {
				continue
			}
			complete = complete && closed >= opened
			part := filepath.Join(c.Dir, fmt.Sprintf("capture-%d%s", i, filepath.Ext(f)))
			if err := os.WriteFile(part, b, 0o600); err != nil {
				return nil, err
			}
			parts = append(parts, part)
		}
		if (len(parts) > 0 && complete) || time.Now().After(deadline) {
			if len(parts) == 0 {
				return nil, fmt.Errorf("scenario %s: the server logged no connection while the workload ran: its server_config must log them (log_connections, log_disconnections, log_min_duration_statement = 0)", s.Name)
			}
			return parts, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// formatOf names a capture's log format by its file's extension.
func formatOf(path string) string {
	if filepath.Ext(path) == ".csv" {
		return "csvlog"
	}
	return "stderr log"
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// rehearseUpgrade runs `rehearse upgrade` from the scenario's cluster to
// major To on the capture: with a Cause, a shape must be slower and that
// setting measured as why; without, the upgrade must pass.
func rehearseUpgrade(ctx context.Context, c *lab.Cluster, env *Env, s Scenario, version string, o diagnose.Options, captures []string, res *Result) error {
	rep, err := trial.RehearseUpgrade(ctx, version, trial.UpgradeOptions{
		SourceOptions: trial.SourceOptions{Log: o.Log, StatementTimeout: o.StatementTimeout, CopyTimeout: o.CopyTimeout},
		Source:        c.DSN(env.DB), To: s.Rehearse.To, Logs: []string{"the server's " + formatOf(captures[0])},
		Sources: []logs.Source{logs.FileSource(captures[0], nil)}, Database: env.DB, Runs: 2, MinRatio: 1.25, Speed: 1})
	slower := errors.Is(err, trial.ErrUpgradeSlower)
	if err != nil && !slower {
		return err
	}
	res.Upgrade = rep
	want := s.Rehearse.Cause
	switch {
	case want == "" && slower:
		res.Unexpected = append(res.Unexpected, "a shape slower after the upgrade: "+fmt.Sprint(rep.Failing))
	case want != "" && !slower:
		res.Missing = append(res.Missing, fmt.Sprintf("a shape slower on PostgreSQL %d", s.Rehearse.To))
	case want != "":
		found, seen := false, []string{}
		for _, sh := range rep.Shapes {
			if c := sh.Cause; c != nil {
				seen = append(seen, fmt.Sprintf("%s: %s explains=%v (%.1f, %.1f, %.1f ms)", printable.Clip(sh.Query, 40), c.Setting, c.Explains, c.OldMS, c.NewMS, c.FixedMS))
			} else if sh.CauseError != "" {
				seen = append(seen, sh.CauseError)
			}
			if c := sh.Cause; sh.Slower(1.25) && c != nil && c.Explains && c.Setting == want {
				found = true
				res.Record("cause_old_ms", c.OldMS)
				res.Record("cause_new_ms", c.NewMS)
				res.Record("cause_fixed_ms", c.FixedMS)
			}
		}
		if !found {
			res.Missing = append(res.Missing, fmt.Sprintf("the slower shape's cause measured as %s (measured: %s; the verdict's reasons: %s)", want, strings.Join(seen, "; "), strings.Join(rep.Failing, "; ")))
		}
	}
	return nil
}
