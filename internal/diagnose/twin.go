package diagnose

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/twin"
	"github.com/pgmedic/pgmedic/internal/verify"
	"github.com/pgmedic/pgmedic/internal/wait"
)

// place is where a kind runs with a twin (verify's table): OnTwin kinds
// write, so they run there, never on the target; CopiesOnTwin kinds read
// the target as it is and make their copy on the twin.
func place(kind string) verify.Place {
	k, _ := verify.KindOf(kind)
	return k.Place
}

// verifyWithTwin runs the experiments with a twin of the tables they
// need: those that write run there, those that read the target as it is
// run on the target and make their copies there, and the rest run on
// the target as always. It returns the findings, what was skipped, and
// the twin's line for the report.
func (o Options) verifyWithTwin(ctx context.Context, sess *envelope.Session, dsn string, snap *model.Snapshot, findings []model.Finding) ([]model.Finding, []model.Skip, string) {
	here, there, refs, rowsNeeded := byPlace(snap, findings)
	defOnly := map[model.RelRef]bool{}
	target := o.engine(sess)
	if len(refs) == 0 && len(there) == 0 {
		out, skipped := target.Run(ctx, snap, findings)
		return out, skipped, ""
	}
	// The copy reads the target: the load rule holds for it as for any
	// experiment. While the target stays busy the twin gets the tables'
	// definitions only (catalog reads, as check itself makes): enough for
	// the experiments that need no rows, and the others say why not.
	busy := o.stillBusy(ctx, sess, snap)
	for _, r := range refs {
		defOnly[r] = busy != "" || !rowsNeeded[r]
	}
	if busy != "" {
		var run []model.Finding
		for _, f := range there {
			if needsRows(snap, f.Experiment) {
				f.Verification = model.NotRunBecause("the twin holds the tables' definitions only, because " + busy + " and copying rows would add to it: run check --twin again when the load allows, or with a bundle of this moment")
				here = append(here, f)
				continue
			}
			run = append(run, f)
		}
		there = run
	}
	var tw *twin.Twin
	var left map[model.RelRef]string
	why := ""
	if len(there) == 0 && busy != "" {
		why = busy
	} else {
		o.logf("building the twin: %d tables", len(refs))
		var err error
		tw, left, err = twin.Build(ctx, sess.Conn, snap, refs, twin.Options{MaxBytes: o.TwinMaxBytes, DSN: o.TwinDSN,
			Keep: o.KeepTwin, CopyTimeout: o.CopyTimeout, DefinitionOnly: defOnly, Log: o.Log,
			Jobs: o.copyJobs(ctx, sess, snap), Dial: o.dialTarget(dsn)})
		if err != nil {
			why = err.Error()
		}
	}
	if tw == nil {
		for i := range there {
			there[i].Verification = model.NotRunBecause("no twin: " + why)
		}
		out, skipped := target.Run(ctx, snap, here)
		return append(out, there...), append(skipped, model.Skip{Rule: "twin", Reason: "no twin: " + why}), ""
	}
	defer tw.Close(context.WithoutCancel(ctx))
	if k := tw.Kept(); k != "" {
		o.logf("%s", k)
	}
	twSnap := twinSnapshot(ctx, snap, tw)
	target.Copies = &verify.Copies{Conn: tw.Conn, Where: tw.Where, Fraction: tw.Fraction, Snap: twSnap}
	here, skipped := target.Run(ctx, snap, here)
	var copied []model.Finding
	for _, f := range there {
		if why, ok := left[NormalRef(snap, f.Experiment.Table)]; ok {
			f.Verification = model.NotRunBecause("the twin could not hold " + f.Experiment.Table.Name + ": " + why)
			here = append(here, f)
			continue
		}
		if locked := lockedOut(snap, tw, f.Experiment); locked != "" {
			f.Verification = model.NotRunBecause(locked)
			here = append(here, f)
			continue
		}
		copied = append(copied, f)
	}
	eng := o.twinEngine(sess, tw)
	copied, more := eng.Run(ctx, twSnap, copied)
	for i := range copied {
		if copied[i].Experiment != nil {
			copied[i].Verification.Where = tw.Where(copied[i].Experiment.Table)
		}
	}
	return append(here, copied...), append(skipped, more...), tw.Summary()
}

// byPlace sorts findings by where their experiments run: here (on the
// target, or none), there (on the twin). refs are the tables the twin
// must hold, and rowsNeeded says which of them need their rows.
func byPlace(snap *model.Snapshot, findings []model.Finding) (here, there []model.Finding, refs []model.RelRef, rowsNeeded map[model.RelRef]bool) {
	rowsNeeded = map[model.RelRef]bool{}
	for _, f := range findings {
		if f.Experiment == nil {
			here = append(here, f)
			continue
		}
		k := f.Experiment.Kind
		if place(k) != verify.OnTarget {
			for _, r := range tablesOf(snap, f.Experiment) {
				if !slices.Contains(refs, r) {
					refs = append(refs, r)
				}
				rowsNeeded[r] = rowsNeeded[r] || needsRows(snap, f.Experiment)
			}
		}
		if place(k) == verify.OnTwin {
			there = append(there, f)
		} else {
			here = append(here, f)
		}
	}
	return here, there, refs, rowsNeeded
}

// stillBusy is the load rule's reason the target is too busy to copy
// rows from, or "". The snapshot's load was read before sampling, so a
// busy server is asked again, a few times.
func (o Options) stillBusy(ctx context.Context, sess *envelope.Session, snap *model.Snapshot) string {
	cores := ServerCores(o.ServerCores, sess.Target.Host)
	busy := verify.LoadRule(snap.Activity, cores)
	for try := 0; busy != "" && try < loadRetries; try++ {
		if try > 0 {
			wait.For(ctx, time.Second)
		}
		if a, err := collect.Load(ctx, sess.Conn); err == nil {
			busy = verify.LoadRule(a, cores)
		}
	}
	return busy
}

// copyJobs is how many sessions read the twin's rows from the target:
// --max-connections, but no more than leaves the active backends at the
// load rule's bound (twice the cores) once they are added, and at least
// pgmedic's own session.
func (o Options) copyJobs(ctx context.Context, sess *envelope.Session, snap *model.Snapshot) int {
	jobs := max(o.MaxConnections, 1)
	if jobs == 1 {
		return 1
	}
	a := snap.Activity
	if now, err := collect.Load(ctx, sess.Conn); err == nil {
		a = now
	}
	if cores := ServerCores(o.ServerCores, sess.Target.Host); cores > 0 {
		jobs = min(jobs, 2*cores-a.Active)
	}
	if a.MaxConnections > 0 {
		jobs = min(jobs, int(0.9*float64(a.MaxConnections))-a.Total)
	}
	return max(jobs, 1)
}

// dialTarget opens one more read-only session on the target, in pgmedic's
// envelope, for the twin's copy.
func (o Options) dialTarget(dsn string) func(context.Context) (*pgx.Conn, func(), error) {
	return func(ctx context.Context) (*pgx.Conn, func(), error) {
		s, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: o.StatementTimeout})
		if err != nil {
			return nil, nil, err
		}
		return s.Conn, s.Close, nil
	}
}

// twinEngine runs experiments on the twin: its connection, sessions and
// pool stand for the target's, and changes are made in place (the twin
// is pgmedic's to write).
func (o Options) twinEngine(sess *envelope.Session, tw *twin.Twin) *verify.Engine {
	eng := o.engine(sess)
	eng.Conn, eng.Lab, eng.InPlace, eng.Workers = tw.Conn, true, true, verify.Sessions(tw.Connect)
	eng.Pool = verify.Pooled(tw.Pool)
	eng.Admit = func(ctx context.Context, limit int) (*verify.Admitted, error) {
		connect, pool, drop, err := tw.Admit(ctx, limit)
		if err != nil {
			return nil, err
		}
		return &verify.Admitted{Connect: verify.Sessions(connect), Pool: verify.Pooled(pool), Close: drop}, nil
	}
	return eng
}

// lockedOut says why an experiment that needs rows cannot have them: a
// table it reads was behind a lock on the target when the twin copied it
// (a schema change queued on it), so the twin holds its definition only.
func lockedOut(snap *model.Snapshot, tw *twin.Twin, exp *model.Experiment) string {
	if !needsRows(snap, exp) {
		return ""
	}
	for _, r := range tablesOf(snap, exp) {
		if why := tw.Locked(r); why != "" {
			return "the twin has no rows of " + r.Name + ": " + why
		}
	}
	return ""
}

// loadRetries is how many times, a second apart, a busy target's load is
// read again before the twin settles for definitions: a burst passes in
// seconds, an incident does not.
const loadRetries = 5

// needsRows says whether an experiment needs the tables' rows on the
// twin: a lock-queue reproduction needs only their definitions, and a load
// replay whose statements read no table of the snapshot only the catalogs.
func needsRows(snap *model.Snapshot, exp *model.Experiment) bool {
	k, _ := verify.KindOf(exp.Kind)
	switch k.Rows {
	case verify.DefinitionsOnly, verify.OwnTable:
		return false
	case verify.RowsWhenTables:
		return len(tablesOf(snap, exp)) > 0
	case verify.RowsForRowLocks:
		return exp.HeadLock == ""
	}
	return true
}

// NormalRef is a reference with the schema the snapshot's table has.
func NormalRef(snap *model.Snapshot, r model.RelRef) model.RelRef {
	if t := snap.Table(r); t != nil {
		return model.RelRef{Schema: t.Schema, Name: t.Name}
	}
	return r
}

// tablesOf are the tables an experiment needs on the twin: its table, and
// every other table its statements read (a join must find them there).
func tablesOf(snap *model.Snapshot, exp *model.Experiment) []model.RelRef {
	if k, _ := verify.KindOf(exp.Kind); k.Rows == verify.OwnTable {
		return nil
	}
	var refs []model.RelRef
	add := func(r model.RelRef) {
		if r = NormalRef(snap, r); !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	if exp.Table.Name != "" {
		add(exp.Table)
	}
	stmts := []*sqlparse.Statement{exp.Stmt}
	if exp.Stmt == nil {
		stmts[0], _ = sqlparse.Parse(exp.Query)
	}
	for _, q := range append([]string{exp.Waiter}, slices.Compact(slices.Clone(exp.Mix))...) {
		if q != "" {
			st, _ := sqlparse.Parse(q)
			stmts = append(stmts, st)
		}
	}
	for _, st := range stmts {
		if st == nil {
			continue
		}
		for _, rel := range st.Relations() {
			if r := (model.RelRef{Schema: rel.Schema, Name: rel.Name}); snap.Table(r) != nil {
				add(r)
			}
		}
	}
	return refs
}

// twinSnapshot is the target's snapshot as the twin's experiments read
// it: the tables copied carry the twin's oids, and the load is the
// twin's own (nobody else uses it).
func twinSnapshot(ctx context.Context, snap *model.Snapshot, tw *twin.Twin) *model.Snapshot {
	s := *snap
	s.Activity = model.Activity{MaxConnections: snap.Activity.MaxConnections}
	s.Tables = slices.Clone(snap.Tables)
	for i, t := range s.Tables {
		for _, c := range tw.Tables {
			if c.Ref.Name == t.Name && c.Ref.Schema == t.Schema {
				var oid uint32
				if tw.Conn.QueryRow(ctx, "SELECT to_regclass($1)::oid", sqlparse.QuoteQualified(c.Ref.Schema, c.Ref.Name)).Scan(&oid) == nil {
					s.Tables[i].OID = oid
				}
			}
		}
	}
	return &s
}
