package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/diagnose"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
)

// Result is one scenario run: what it expected, what was missing or
// unexpected, the workload's own figures and check's report.
type Result struct {
	Scenario   string   `json:"scenario"`
	Expected   []Expect `json:"expected"`
	MustNot    []Expect `json:"must_not"`
	Missing    []string `json:"missing"`
	Unexpected []string `json:"unexpected"`
	// LeftOut are expectations not held on this build, with the reason
	// (one that needs JIT, on a server built without LLVM).
	LeftOut []string `json:"left_out,omitempty"`
	// Metrics are the workload's own measurements.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Seconds is how long the scenario took: setup, workload and check.
	Seconds float64        `json:"seconds"`
	Report  *report.Report `json:"report"`
	// Rehearsals are a rehearsal scenario's reports (Scenario.Rehearse),
	// which has no check report.
	Rehearsals []*report.RehearsalReport `json:"rehearsals,omitempty"`
	Upgrade    *report.UpgradeReport     `json:"upgrade,omitempty"`
	// NotRun says why the scenario could not run here (a client that is
	// not installed, and how to install it); nothing else is set then.
	NotRun string `json:"not_run,omitempty"`
	// Skipped says why the scenario was not run on this server build (it
	// needs JIT or HypoPG, which the build lacks): not a failure.
	Skipped string `json:"skipped,omitempty"`
}

// Passed says whether the scenario ran, every expected finding was there
// and nothing the scenario forbids.
func (r *Result) Passed() bool {
	return r.NotRun == "" && r.Skipped == "" && len(r.Missing) == 0 && len(r.Unexpected) == 0
}

// warmUp is how long a workload that runs during check runs before check
// starts, so that its sessions are in the state it reproduces: 1.5 s from
// its start, or half a second from its Env.Ready when it signals one (it
// says its state is in place; the half second lets the statistics of what
// it did reach the views check reads).
func (s Scenario) warmUp() time.Duration {
	if d, err := time.ParseDuration(s.WarmUp); err == nil && s.WarmUp != "" {
		return d
	}
	if workloads[s.Name].SignalsReady {
		return 500 * time.Millisecond
	}
	return 1500 * time.Millisecond
}

// readyLimit bounds the wait for a workload to signal it is ready (a
// machine that stalls, not a measure of speed).
const readyLimit = 2 * time.Minute

// workloadEnded is the error of a workload that ended before check began.
func workloadEnded(s Scenario, err error, stop context.CancelFunc) error {
	stop()
	if err == nil {
		err = fmt.Errorf("scenario %s: the workload ended before check started", s.Name)
	}
	return &diagnose.InputError{Err: err}
}

// Start runs a workload that runs while check samples, and returns once
// it is under way: its own sign that its sessions are in place (Ready),
// then the warm-up. stop ends it; done then gives what Run returned. A
// workload that ends first failed to reproduce, and says so.
func (e *Env) Start(ctx context.Context, s Scenario) (stop context.CancelFunc, done <-chan error, err error) {
	wctx, cancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	go func() { ch <- e.Run(wctx, s) }()
	if !workloads[s.Name].SignalsReady {
		e.Ready() // its state begins with the workload
	}
	select {
	case <-e.ready:
	case err := <-ch:
		return nil, nil, workloadEnded(s, err, cancel)
	case <-time.After(readyLimit):
		cancel()
		<-ch
		return nil, nil, &diagnose.InputError{Err: fmt.Errorf("scenario %s: the workload did not reach its state within %s", s.Name, readyLimit)}
	}
	select {
	case err := <-ch:
		return nil, nil, workloadEnded(s, err, cancel)
	case <-time.After(s.warmUp()):
	}
	return cancel, ch, nil
}

// sessionsGone waits until the workload's sessions have left the server
// (their backends see the client gone and end, rolling back what they
// held open), for up to 10 s: a bound for a stalled machine.
func (e *Env) sessionsGone(ctx context.Context) {
	admin, err := e.Admin(ctx)
	if err != nil {
		return
	}
	defer admin.Close(context.Background())
	err = waitUntil(ctx, 10*time.Second, func() (bool, string, error) {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = $1", e.Role).Scan(&n)
		return n == 0, fmt.Sprintf("%d sessions of the workload still there", n), err
	})
	if err != nil {
		e.Log("the workload's sessions did not end: %v", err)
	}
}

// StartBouncer puts the scenario's PgBouncer (PgBouncer, which must be
// set) in front of c for its workload (Env.Bouncer); the caller stops it.
func (e *Env) StartBouncer(ctx context.Context, c *lab.Cluster, s Scenario) (*lab.Bouncer, error) {
	b, err := c.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: s.PgBouncer.PoolSize, Mode: s.PgBouncer.Mode, Users: []string{AppRole}})
	if err != nil {
		return nil, err
	}
	e.Bouncer = b
	return b, nil
}

// checkDuring runs the workload and, once it is under way, check; the
// workload is stopped when check is done.
func checkDuring(ctx context.Context, c *lab.Cluster, s Scenario, version string, o diagnose.Options) (*Env, *report.Report, error) {
	env, err := Setup(ctx, c, s, o.Log)
	if err != nil {
		return nil, nil, &diagnose.InputError{Err: err}
	}
	if s.PgBouncer != nil {
		b, err := env.StartBouncer(ctx, c, s)
		if err != nil {
			return nil, nil, &diagnose.InputError{Err: err}
		}
		defer b.Stop()
		o.PgBouncer = b.AdminDSN()
	}
	stop, done, err := env.Start(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	if o.Twin {
		// The twin runs on this machine: the workload ends once check
		// has sampled it, or the twin's measurements would share the
		// cores with it (a twin on another machine would not).
		o.Sampled = stop
	}
	if s.QuietForExperiments && !o.Twin {
		o.Sampled = func() {
			stop()
			env.sessionsGone(ctx)
		}
	}
	rep, err := diagnose.Check(ctx, checkDSN(c, env.DB), version, o, model.Info)
	stop()
	if werr := <-done; werr != nil && err == nil {
		err = &diagnose.InputError{Err: werr}
	}
	if measure := workloads[s.Name].AfterCheck; measure != nil && err == nil && !o.Twin {
		// Measurements that need the database to themselves, and that
		// verify findings no experiment on a target can (goodput).
		if err := measure(ctx, env, rep.Findings); err != nil {
			return nil, nil, &diagnose.InputError{Err: fmt.Errorf("scenario %s, after check: %w", s.Name, err)}
		}
		rep.Add(nil)
	}
	return env, rep, err
}

// Run reproduces a scenario on the cluster and checks it as check would,
// with experiments allowed to write (it is a lab database), or with
// o.Twin as a production target (experiments that write go to a twin). Expectations
// are judged on every finding; the report keeps those at or above min.
func Run(ctx context.Context, c *lab.Cluster, s Scenario, version string, o diagnose.Options, min model.Severity) (*Result, error) {
	if why := s.NotRunOn(c); why != "" {
		return &Result{Scenario: s.Name, Skipped: why}, nil
	}
	s, leftOut := s.On(c)
	began := time.Now()
	if s.Isolated(c) {
		lo := lab.Options{BinDir: c.BinDir, Standby: s.Standby, Log: o.Log, Config: strings.Join(s.ServerConfig, "\n")}
		if r := s.Rehearse; r != nil && r.From != 0 {
			// An upgrade's source runs the major it is upgraded from.
			// A major that is not installed is a missing part, as a client
			// is: the scenario cannot run here until it is installed.
			for _, m := range []int{r.From, r.To} {
				if _, err := lab.FindServer("", m); err != nil {
					return nil, MissingMajor(m)
				}
			}
			lo.BinDir, lo.Major = "", r.From
		}
		own, err := lab.Create(ctx, lo)
		if err != nil {
			return nil, &diagnose.InputError{Err: fmt.Errorf("scenario %s: starting a cluster of its own: %w", s.Name, err)}
		}
		defer own.Destroy(context.Background())
		c = own
		// A cluster of its own that logs through the collector: check
		// reads its log over the connection, as on a production server
		// (the lab's shared cluster logs to a file of its own, which
		// check does not read).
		if s.LogsThroughCollector() && o.ServerLogBytes == 0 {
			o.ServerLogBytes = 16 << 20
		}
	}
	if s.Rehearse != nil {
		if o.Twin {
			// A rehearsal always works on a twin; there is nothing else to
			// prove on one.
			return &Result{Scenario: s.Name, Skipped: "a rehearsal runs on a twin already"}, nil
		}
		res, err := rehearseScenario(ctx, c, s, version, o)
		if res != nil {
			res.LeftOut, res.Seconds = leftOut, model.Round(time.Since(began).Seconds(), 1)
		}
		return res, err
	}
	// With o.Twin the database is checked as a production target would
	// be: no experiment writes to it, those that must write run on a twin.
	o.Lab = !o.Twin
	// Sessions are sampled while a workload runs during check; after a
	// workload that has ended there is nothing to see but an idle server.
	o.SampleFor = 0
	if s.DuringCheck {
		o.SampleFor = time.Second
	}
	if s.Sample != "" {
		o.SampleFor, _ = time.ParseDuration(s.Sample) // load checked it
	}
	if s.StatementTimeout != "" {
		o.StatementTimeout, _ = time.ParseDuration(s.StatementTimeout) // load checked it
	}
	if o.SampleEvery <= 0 {
		o.SampleEvery = 100 * time.Millisecond
	}
	var env *Env
	var rep *report.Report
	var err error
	if s.DuringCheck {
		env, rep, err = checkDuring(ctx, c, s, version, o)
	} else {
		if env, err = Prepare(ctx, c, s, o.Log); err != nil {
			return nil, &diagnose.InputError{Err: err}
		}
		rep, err = diagnose.Check(ctx, checkDSN(c, env.DB), version, o, model.Info)
	}
	if err != nil {
		return nil, err
	}
	// The statements an engineer would paste from the application's log:
	// explained with ANALYZE on the scenario's database, their findings
	// judged with check's.
	if len(s.Explain) > 0 {
		sess, err := envelope.Connect(ctx, checkDSN(c, env.DB), envelope.Options{StatementTimeout: o.StatementTimeout})
		if err != nil {
			return nil, err
		}
		defer sess.Close()
		for _, q := range s.Explain {
			stmt, e, err := diagnose.Query(ctx, sess, q, true, nil)
			if err != nil {
				return nil, err
			}
			in := rules.PlanInput{Explain: e, Query: q, Stmt: stmt, Object: model.Object{Kind: "query", Name: printable.Shorten(q, 80)}}
			fs, _, err := diagnose.Plan(ctx, sess, in, o.PlanOptions())
			if err != nil {
				return nil, err
			}
			rep.Add(fs)
		}
		rules.Sort(rep.Findings)
	}
	missing, unexpected := s.Evaluate(rep.Findings)
	res := &Result{Scenario: s.Name, Expected: s.Expect, MustNot: s.MustNot, Missing: missing, Unexpected: unexpected,
		LeftOut: leftOut, Metrics: env.Metrics, Report: rep.Filter(min), Seconds: model.Round(time.Since(began).Seconds(), 1)}
	if res.Expected == nil {
		res.Expected = []Expect{}
	}
	if res.MustNot == nil {
		res.MustNot = []Expect{}
	}
	return res, nil
}

// Text writes the result's report: check's, or each rehearsal's.
func (r *Result) Text(w io.Writer) error {
	if r.Rehearse() {
		if r.Upgrade != nil {
			return r.Upgrade.Text(w)
		}
		for _, rep := range r.Rehearsals {
			if err := rep.Text(w); err != nil {
				return err
			}
			fmt.Fprintln(w)
		}
		return nil
	}
	return r.Report.Text(w)
}

// JSON writes the result's report as JSON: check's, or the rehearsals'.
func (r *Result) JSON(w io.Writer) error {
	if r.Rehearse() {
		if r.Upgrade != nil {
			return r.Upgrade.JSON(w)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r.Rehearsals)
	}
	return r.Report.JSON(w)
}

// Rehearse says the result is a rehearsal's (it has no check report).
func (r *Result) Rehearse() bool {
	return r.Report == nil && (len(r.Rehearsals) > 0 || r.Upgrade != nil)
}

// Parts are the result's document parts, named for the scenario and
// carrying note: check's report, or one part per rehearsal.
func (r *Result) Parts(note string) []report.Part {
	if !r.Rehearse() {
		return []report.Part{{Name: r.Scenario, Note: note, Check: r.Report}}
	}
	if r.Upgrade != nil {
		return []report.Part{{Name: r.Scenario, Note: note, Upgrade: r.Upgrade}}
	}
	var out []report.Part
	for i, rep := range r.Rehearsals {
		p := report.Part{Name: r.Scenario + ": " + rep.Migration.Name, Rehearsal: rep}
		if i == 0 {
			p.Note = note
		}
		out = append(out, p)
	}
	return out
}

// checkDSN is the DSN check connects to a scenario's database with. The
// lab's server is known to be PostgreSQL, so it waits as long as
// connect_timeout for the backend's first answer rather than the 750 ms
// check gives a port it knows nothing of: a workload that keeps two
// cores busy can delay a fork's first reply past that.
func checkDSN(c *lab.Cluster, db string) string { return c.DSN(db) + "&connect_timeout=10" }
