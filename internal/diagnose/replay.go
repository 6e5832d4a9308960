package diagnose

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
	"github.com/pgmedic/pgmedic/internal/twin"
	"github.com/pgmedic/pgmedic/internal/verify"
)

// Source is what `replay --source` learns of the server a log came from:
// its findings (the rules on a read-only snapshot; nothing is re-run
// there), and, with --twin, a twin holding every table the captured
// statements name.
type Source struct {
	Findings []model.Finding
	Twin     *twin.Twin
}

// ReplaySource reads the source server for a replay. queries are the
// capture's statement texts (one per shape); the twin copies the tables
// they name that the source has. The copy reads the source, so the load
// rule holds: a busy source is not copied.
func ReplaySource(ctx context.Context, dsn string, queries []string, build bool, o Options) (*Source, error) {
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: o.StatementTimeout})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	opts := collect.Defaults()
	opts.SampleFor = 0
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		return nil, inputErr(err)
	}
	snap.ServerCores = serverCores(o.ServerCores, sess.Target.Host)
	selected, _ := rules.Select(o.Rules)
	findings, _ := rules.Run(snap, selected)
	for i := range findings {
		findings[i].Clamp()
	}
	src := &Source{Findings: findings}
	if !build {
		return src, nil
	}
	var refs []model.RelRef
	for _, q := range queries {
		st, err := sqlparse.Parse(q)
		if err != nil || st == nil {
			continue
		}
		for _, rel := range st.Relations() {
			r := model.RelRef{Schema: rel.Schema, Name: rel.Name}
			if snap.Table(r) == nil {
				continue
			}
			if r = normalRef(snap, r); !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	if len(refs) == 0 {
		return nil, inputErrf("none of the captured statements names a table of the source's database %s: check --source (the server and database the log came from)", sess.Target.Database)
	}
	if busy := verify.LoadRule(snap.Activity, snap.ServerCores); busy != "" {
		return nil, inputErrf("the source is too busy to copy from (%s): run the replay when it is quieter, or replay against a copy you made (--dsn)", busy)
	}
	o.logf("building the twin: %d tables the capture names", len(refs))
	tw, skipped, err := twin.Build(ctx, sess.Conn, snap, refs, twin.Options{MaxBytes: o.TwinMaxBytes, CopyTimeout: o.CopyTimeout, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("building the twin: %w", err)
	}
	for r, why := range skipped {
		o.logf("twin: %s.%s left out: %s", r.Schema, r.Name, why)
	}
	src.Twin = tw
	return src, nil
}
