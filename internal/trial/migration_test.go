package trial

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/migration"
	"github.com/pgmedic/pgmedic/internal/rehearse"
	"github.com/pgmedic/pgmedic/internal/report"
)

// TestVerdictNamesWhatTheSafeFormDidNotAvoid: a column's type change
// broke the application's prepared statements as written and, at its
// switch, in its safe form too: the verdict fails and says both, so the
// safe form is not taken for the cure of it. A safe form that only
// failed where the migration as written did not is no reason to fail.
func TestVerdictNamesWhatTheSafeFormDidNotAvoid(t *testing.T) {
	broke := "40 of the application's 118 calls ... SQLSTATE 0A000"
	step := func(v, broke string) *rehearse.StepResult {
		return &rehearse.StepResult{Step: migration.Step{SQL: "ALTER TABLE t ..."}, Verdict: v, Broke: broke}
	}
	rep := &report.RehearsalReport{FailOn: []string{"queued", "failed"}, Runs: []*rehearse.Run{
		{Steps: []*rehearse.StepResult{step(rehearse.Failed, broke)}},
		{Steps: []*rehearse.StepResult{step(rehearse.OK, ""), step(rehearse.Failed, broke)}},
	}}
	if err := verdict(rep); !errors.Is(err, ErrMigrationRisky) || len(rep.Failing) != 2 ||
		!strings.HasPrefix(rep.Failing[1], "its safe form broke the application's statements too: step 2") {
		t.Errorf("%v: %q", err, rep.Failing)
	}
	rep.Failing = nil
	rep.Runs[0].Steps[0] = step(rehearse.OK, "")
	if err := verdict(rep); errors.Is(err, ErrMigrationRisky) || len(rep.Failing) != 0 {
		t.Errorf("only the safe form failed: %v: %q", err, rep.Failing)
	}
}
