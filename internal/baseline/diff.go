package baseline

import (
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Finding statuses.
const (
	StatusNew        = "NEW"
	StatusPersisting = "PERSISTING"
	StatusResolved   = "RESOLVED"
)

// Statement verdicts.
const (
	Slower  = "slower"
	Faster  = "faster"
	Changed = "changed"
)

// FindingChange is one finding's status between the baseline and now.
type FindingChange struct {
	Status  string        `json:"status"`
	Finding model.Finding `json:"finding"`
	// Was is the finding's severity in the baseline, for a persisting one
	// whose severity changed.
	Was string `json:"was_severity,omitempty"`
}

// Figures are one side's figures of a statement.
type Figures struct {
	Calls          int64   `json:"calls"`
	MeanMS         float64 `json:"mean_ms"`
	BuffersPerCall float64 `json:"buffers_per_call"`
	RowsPerCall    float64 `json:"rows_per_call"`
	TempPerCall    float64 `json:"temp_blocks_per_call,omitempty"`
	JITShare       float64 `json:"jit_share,omitempty"`
	Plan           string  `json:"plan,omitempty"`
}

// StatementChange is a statement whose figures moved between the two
// reports.
type StatementChange struct {
	Fingerprint string  `json:"fingerprint"`
	QueryID     string  `json:"queryid"`
	Query       string  `json:"query"`
	Role        string  `json:"role,omitempty"`
	Verdict     string  `json:"verdict"`
	Before      Figures `json:"before"`
	After       Figures `json:"after"`
	// Ratio is the mean per call now over the baseline's.
	Ratio   float64  `json:"ratio"`
	Reasons []string `json:"reasons"`
	// Remeasured is the statement run again now (and with the baseline's
	// plan when settings bring it back); nil when nothing was run.
	Remeasured *model.Remeasured `json:"remeasured,omitempty"`
	// Regression says the slowdown stands: re-measured, or from the two
	// reports' figures alone where it could not be run again (Measured
	// false). A slowdown the re-run does not reproduce is not one, nor is
	// one of a statement that does the same work as in the baseline.
	Regression bool `json:"regression"`
	Measured   bool `json:"measured"`
	// Note says why a slowdown is not a regression: the re-run did not
	// reproduce it, or the work is the baseline's.
	Note string `json:"note,omitempty"`
}

// Diff is check --baseline's comparison of a check with an earlier
// report.
type Diff struct {
	Baseline   string            `json:"baseline"`
	BaselineAt time.Time         `json:"baseline_collected_at"`
	Findings   []FindingChange   `json:"findings"`
	Statements []StatementChange `json:"statements"`
	Counts     Counts            `json:"counts"`
}

// Counts sums the diff up.
type Counts struct {
	New         int `json:"new"`
	Persisting  int `json:"persisting"`
	Resolved    int `json:"resolved"`
	Slower      int `json:"slower"`
	Regressions int `json:"regressions"`
	Faster      int `json:"faster"`
}
