// Package trial holds the pipelines of the commands that compare two
// sides of one workload: replay (a capture against a server, or A against
// B with a change), rehearse migration (a migration on a twin while the
// captured application runs) and rehearse upgrade (the workload on two
// majors). Each reads its source read-only, copies what the workload
// names into twins, replays, and gives a verdict that says first how much
// of the workload it replayed. Finding problems is internal/diagnose's;
// this package uses it only for the source's findings.
package trial

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/diagnose"
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

// SourceOptions are what reading a production source and copying it into
// twins use (replay --source, the rehearsals): the rules run on its
// snapshot, its cores for the load rule, pgmedic's statement_timeout and
// the copy's, where the twin lives and how much it copies, and where
// progress goes.
type SourceOptions struct {
	Rules            []string
	ServerCores      int
	StatementTimeout time.Duration
	CopyTimeout      time.Duration
	TwinDSN          string
	TwinMaxBytes     int64
	Log              func(format string, args ...any)
}

func (o *SourceOptions) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// ReplaySource reads the source server for a replay. queries are the
// capture's statement texts (one per shape); the twin copies the tables
// they name that the source has. The copy reads the source, so the load
// rule holds: a busy source is not copied.
func ReplaySource(ctx context.Context, dsn string, queries []string, build bool, o SourceOptions) (*Source, error) {
	var twins []twin.Options
	if build {
		twins = append(twins, twin.Options{MaxBytes: o.TwinMaxBytes, CopyTimeout: o.CopyTimeout, DSN: o.TwinDSN, Log: o.Log})
	}
	src, tws, err := sourceTwins(ctx, dsn, queries, o, twins...)
	if err != nil {
		return nil, err
	}
	if len(tws) > 0 {
		src.Twin = tws[0]
	}
	return src, nil
}

// sourceTwins reads the source read-only (its findings by the rules on a
// snapshot) and builds one twin per entry of twins, each holding the
// tables queries name that the source has. The copies read the source,
// so the load rule holds: a busy source is not copied.
func sourceTwins(ctx context.Context, dsn string, queries []string, o SourceOptions, twins ...twin.Options) (*Source, []*twin.Twin, error) {
	sess, err := envelope.Connect(ctx, dsn, envelope.Options{StatementTimeout: o.StatementTimeout})
	if err != nil {
		return nil, nil, err
	}
	defer sess.Close()
	opts := collect.Defaults()
	opts.SampleFor = 0
	snap, err := collect.SnapshotWith(ctx, sess.Conn, time.Now(), opts)
	if err != nil {
		return nil, nil, diagnose.InputErr(err)
	}
	snap.ServerCores = diagnose.ServerCores(o.ServerCores, sess.Target.Host)
	selected, _ := rules.Select(o.Rules)
	findings, _ := rules.Run(snap, selected)
	for i := range findings {
		findings[i].Clamp()
	}
	src := &Source{Findings: findings}
	if len(twins) == 0 {
		return src, nil, nil
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
			if r = diagnose.NormalRef(snap, r); !slices.Contains(refs, r) {
				refs = append(refs, r)
			}
		}
	}
	if len(refs) == 0 {
		return nil, nil, diagnose.InputErrorf("none of the captured statements names a table of the source's database %s: check --source (the server and database the log came from)", sess.Target.Database)
	}
	if busy := verify.LoadRule(snap.Activity, snap.ServerCores); busy != "" {
		return nil, nil, diagnose.InputErrorf("the source is too busy to copy from (%s): run the replay when it is quieter, or replay against a copy you made (--dsn)", busy)
	}
	var out []*twin.Twin
	for _, to := range twins {
		o.logf("building the twin: %d tables the capture names", len(refs))
		tw, skipped, err := twin.Build(ctx, sess.Conn, snap, refs, to)
		if err != nil {
			for _, t := range out {
				t.Close(context.WithoutCancel(ctx))
			}
			return nil, nil, fmt.Errorf("building the twin: %w", err)
		}
		for r, why := range skipped {
			o.logf("twin: %s.%s left out: %s", r.Schema, r.Name, why)
		}
		out = append(out, tw)
	}
	return src, out, nil
}
