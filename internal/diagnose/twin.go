package diagnose

import (
	"context"
	"slices"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/twin"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// onTwin are the experiments that need writes (an index built, a fresh
// ANALYZE on a copy): with --twin they run on the twin, never on the
// target.
var onTwin = []string{model.ExpIndex, model.ExpMisestimate}

// verifyWithTwin runs the experiments: those that need writes on a twin
// of the tables they read, the others on the target as always. It
// returns the findings, what was skipped, and the twin's line for the
// report.
func (o Options) verifyWithTwin(ctx context.Context, sess *envelope.Session, snap *model.Snapshot, findings []model.Finding) ([]model.Finding, []model.Skip, string) {
	var here, there []model.Finding
	var refs []model.RelRef
	for _, f := range findings {
		if f.Experiment != nil && slices.Contains(onTwin, f.Experiment.Kind) {
			there = append(there, f)
			if !slices.Contains(refs, f.Experiment.Table) {
				refs = append(refs, f.Experiment.Table)
			}
			continue
		}
		here = append(here, f)
	}
	here, skipped := o.engine(sess).Run(ctx, snap, here)
	if len(there) == 0 {
		return here, skipped, ""
	}
	notRun := func(why string) ([]model.Finding, []model.Skip, string) {
		for i := range there {
			there[i].Verification = model.NotRunBecause(why)
		}
		return append(here, there...), append(skipped, model.Skip{Rule: "twin", Reason: why}), ""
	}
	// The copy reads the target: the load rule holds for it as for any
	// experiment.
	if why := verify.LoadRule(snap.Activity, serverCores(o.ServerCores, sess.Target.Host)); why != "" {
		return notRun("no twin: " + why)
	}
	o.logf("building the twin: %d tables", len(refs))
	tw, left, err := twin.Build(ctx, sess.Conn, snap, refs, twin.Options{MaxBytes: o.TwinMaxBytes, DSN: o.TwinDSN,
		Keep: o.KeepTwin, CopyTimeout: o.CopyTimeout, Log: o.Log})
	if err != nil {
		return notRun("no twin: " + err.Error())
	}
	defer tw.Close(context.WithoutCancel(ctx))
	if k := tw.Kept(); k != "" {
		o.logf("%s", k)
	}
	var copied []model.Finding
	for _, f := range there {
		if why, ok := left[f.Experiment.Table]; ok {
			f.Verification = model.NotRunBecause("the twin could not hold " + f.Experiment.Table.Name + ": " + why)
			here = append(here, f)
			continue
		}
		copied = append(copied, f)
	}
	eng := o.engine(sess)
	eng.Conn, eng.Lab = tw.Conn, true
	copied, more := eng.Run(ctx, twinSnapshot(ctx, snap, tw), copied)
	for i := range copied {
		if copied[i].Experiment != nil {
			copied[i].Verification.Where = tw.Where(copied[i].Experiment.Table)
		}
	}
	return append(here, copied...), append(skipped, more...), tw.Summary()
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
				if tw.Conn.QueryRow(ctx, "SELECT to_regclass($1)::oid", twinQuoted(c.Ref)).Scan(&oid) == nil {
					s.Tables[i].OID = oid
				}
			}
		}
	}
	return &s
}

func twinQuoted(r model.RelRef) string {
	q := sqlparse.QuoteIdent(r.Name)
	if r.Schema != "" {
		q = sqlparse.QuoteIdent(r.Schema) + "." + q
	}
	return q
}
