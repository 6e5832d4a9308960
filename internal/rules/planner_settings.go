package rules

import (
	"fmt"
	"strconv"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// PlannerSettingsID is the stable id of the rule.
const PlannerSettingsID = "planner-settings"

// Thresholds (see docs/rules/planner-settings.md).
const (
	// random_page_cost over seq_page_cost above this prices a random read
	// as a disk with a seek would.
	plannerMaxPageCostRatio = 1.5
	// Reads are cheap when this share of blocks is found in shared
	// buffers, or when a read from outside them takes this long on
	// average (track_io_timing): an SSD or the page cache, not a seek.
	plannerCachedShare = 0.99
	plannerFastReadMS  = 0.2
	plannerMinBlocks   = 10000
	// The value proposed: what SSD-backed and cached servers are run with.
	plannerProposedPageCost = "1.1"
)

// plannerSettings judges the planner's cost settings against what this
// server measures: random_page_cost (4 by default, a disk's seek) on a
// database whose reads come from memory or from storage where a random
// read costs what a sequential one does. The planner then prices index
// scans and nested loops into indexes too high and prefers scans of whole
// tables. The rule proposes; the experiment plans the top statements both
// ways and times those whose plan changes (the finding is info until a
// statement measures faster and none slower).
func plannerSettings(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	d := s.DatabaseStats
	if !d.BlocksKnown || d.BlksHit+d.BlksRead < plannerMinBlocks || len(s.Statements) == 0 {
		return nil, nil
	}
	rpc, source := effective(s, "", "random_page_cost")
	spc, _ := effective(s, "", "seq_page_cost")
	r, errR := strconv.ParseFloat(rpc, 64)
	q, errS := strconv.ParseFloat(spc, 64)
	if errR != nil || errS != nil || q <= 0 || r/q <= plannerMaxPageCostRatio {
		return nil, nil
	}
	hit := float64(d.BlksHit) / float64(d.BlksHit+d.BlksRead)
	readMS := 0.0
	timed := s.Settings["track_io_timing"].Value == "on" && d.BlksRead > 0
	if timed {
		readMS = d.BlkReadMS / float64(d.BlksRead)
	}
	cheap := hit >= plannerCachedShare || (timed && d.BlksRead >= plannerMinBlocks/10 && readMS <= plannerFastReadMS)
	if !cheap {
		return nil, nil
	}
	why := fmt.Sprintf("%.1f%% of this database's block reads are found in shared buffers", 100*hit)
	if timed && d.BlksRead > 0 {
		why += fmt.Sprintf(", and a read from outside them takes %s on average (track_io_timing)", readTime(readMS))
	}
	ev := []model.Evidence{
		{Label: fmt.Sprintf("random_page_cost (%s)", orDefaultSetting(source)), Value: r},
		{Label: "seq_page_cost", Value: q},
		{Label: "blocks found in shared buffers", Value: float64(d.BlksHit)},
		{Label: "blocks read from outside them", Value: float64(d.BlksRead)},
	}
	if timed {
		ev = append(ev, model.Evidence{Label: "mean time of a block read (track_io_timing)", Value: model.Round(readMS, 4), Unit: "ms"})
	}
	return []model.Finding{{
		Rule:     PlannerSettingsID,
		Severity: model.Info,
		Title:    fmt.Sprintf("random_page_cost = %s prices a random page read at %.0f sequential ones, but %s", rpc, r/q, why),
		Object:   model.Object{Kind: "setting", Name: "random_page_cost", Database: s.Database},
		Evidence: ev,
		Impact:   model.Impact{Summary: "the planner prices index scans and nested loops into indexes as if each page were a disk seek, and prefers scanning whole tables where an index would read a few pages"},
		Fix: model.Fix{
			Summary: fmt.Sprintf("random_page_cost = %s for this database (an SSD, or data that lives in memory); other databases of the server keep theirs", plannerProposedPageCost),
			SQL:     fmt.Sprintf("ALTER DATABASE %s SET random_page_cost = %s;", sqlparse.QuoteIdent(s.Database), plannerProposedPageCost),
		},
		Verification: model.NotRunBecause("not verified yet"),
		Docs:         docsPath(PlannerSettingsID),
		Experiment: &model.Experiment{Kind: model.ExpPlannerSetting,
			AppSettings: roleSettingsFor(s, "", "random_page_cost", "seq_page_cost", "search_path"),
			FixSettings: map[string]string{"random_page_cost": plannerProposedPageCost}},
	}}, nil
}

// readTime writes a block read's mean time; the page cache answers in
// microseconds, which track_io_timing may round to nothing.
func readTime(ms float64) string {
	if ms < 0.001 {
		return "under a microsecond"
	}
	return fmt.Sprintf("%.3f ms", ms)
}
