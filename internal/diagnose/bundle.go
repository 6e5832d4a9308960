package diagnose

import (
	"fmt"
	"path/filepath"

	"github.com/pgmedic/pgmedic/internal/baseline"
	"github.com/pgmedic/pgmedic/internal/bundle"
	"github.com/pgmedic/pgmedic/internal/collect"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/report"
	"github.com/pgmedic/pgmedic/internal/rules"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// FromBundle is check on a watch incident bundle: the rules judge the
// sessions sampled over the incident's window, the statements that ran in
// it and the catalogs read when it closed, with no connection. Nothing
// can be re-run on a server that is not there: every experiment is
// not-run, with how to run it. With o.Baseline the report is compared too
// (its slowdowns judged on the figures).
func FromBundle(dir, version string, o Options, min model.Severity) (*report.Report, error) {
	selected, err := rules.Select(o.Rules)
	if err != nil {
		return nil, InputErrorf("--rules: %v", err)
	}
	meta, snap, err := bundle.Read(dir)
	if err != nil {
		return nil, InputErr(err)
	}
	collect.Reparse(snap)
	if snap.Missing == nil {
		snap.Missing = map[string]model.Skip{}
	}
	snap.ServerCores, snap.CoresGuessed = meta.ServerCores, meta.CoresGuessed
	snap.ShowValues = o.ShowValues
	findings, skipped := rules.Run(snap, selected)
	why := fmt.Sprintf("read from the incident bundle %s, with no server to re-run on: pgmedic check on %s measures it", filepath.Base(dir), meta.Server)
	for i := range findings {
		if findings[i].Verification.Status == "" || findings[i].Experiment != nil {
			findings[i].Verification = model.NotRunBecause(why)
		}
	}
	for _, n := range meta.Notes {
		skipped = append(skipped, model.Skip{Rule: "bundle", Reason: n})
	}
	rep := report.New(version, meta.Server, snap.CollectedAt, findings, skipped, rules.SnapshotRules(selected), min)
	rep.Target.Database = meta.Database
	rep.Unseen = unseen(snap, skipped)
	rep.Sessions = snap.Sampling.Summary()
	rep.Timeline = bundleTimeline(dir, meta, snap)
	if !o.ShowValues {
		rep.Sessions.HideValues(sqlparse.Normalised)
		rep.Timeline.HideValues(sqlparse.Normalised)
	}
	rep.Statements, rep.Plans = snap.StatementRows()
	rep.Incident = &report.IncidentHeader{Bundle: filepath.Base(dir), Triggers: meta.Triggers, From: meta.From, To: meta.To, Gaps: meta.Gaps}
	if o.Baseline != nil {
		d := baseline.Compare(o.Baseline, findings, rep.Statements, rep.Plans, min)
		baseline.Settle(d, nil)
		rep.Baseline = d
	}
	return rep, nil
}

// bundleTimeline is the picture of an incident: every tick of its window
// (the sessions of all databases, as watch sampled them), the triggers as
// they fired, the stretch the rules judged (the snapshot's ticks) and the
// gaps. A bundle whose window cannot be read is drawn from the judged
// ticks alone.
func bundleTimeline(dir string, meta *bundle.Meta, snap *model.Snapshot) *model.Timeline {
	var judged []model.ActivitySample
	var judgedPools []model.PoolSample
	if snap.Sampling != nil {
		judged, judgedPools = snap.Sampling.Samples, snap.Sampling.Pools
	}
	samples, pools, gaps, _, err := bundle.ReadWindow(dir)
	if err != nil || len(samples) == 0 {
		samples, pools = judged, judgedPools
	}
	tl := model.NewTimeline(samples, pools)
	if tl == nil {
		return nil
	}
	if !meta.From.IsZero() && meta.From.Before(tl.From) {
		tl.From = meta.From
	}
	if meta.To.After(tl.To) {
		tl.To = meta.To
	}
	if len(judged) > 0 {
		tl.Judged = &model.Span{From: judged[0].At, To: judged[len(judged)-1].At, Note: "the ticks the rules judged: where the triggers fired"}
	}
	tl.Fired, tl.Gaps = meta.Fired, gaps
	return tl
}
