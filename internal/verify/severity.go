package verify

import "github.com/pgmedic/pgmedic/internal/model"

// A confirmed fix is as severe as what it was measured to take back: the
// part of the database's statement time it saves (a statement's share of
// that time, times the part of the statement's time the fix removed).
// A fix confirmed on 0.96 -> 0.76 ms for a statement with 0.2% of the
// time is true and worth knowing, and no warning.
const (
	savedWarning  = 0.05
	savedCritical = 0.30
)

// savedSeverity is the severity of a fix that takes back saved (0 to 1) of
// the database's statement time.
func savedSeverity(saved float64) model.Severity {
	switch {
	case saved >= savedCritical:
		return model.Critical
	case saved >= savedWarning:
		return model.Warning
	}
	return model.Info
}

// statementSaving is the part of the database's statement time a fix
// takes back from a statement with share of it, measured before -> after.
func statementSaving(share, before, after float64) float64 {
	if before <= 0 || after >= before {
		return 0
	}
	return share * (before - after) / before
}

// dbShare is a statement's share of the snapshot's statement time.
func dbShare(snap *model.Snapshot, queryID int64) float64 {
	var total, own float64
	for _, st := range snap.Statements {
		total += st.TotalExecMS
		if st.QueryID == queryID {
			own = st.TotalExecMS
		}
	}
	if total <= 0 {
		return 0
	}
	return own / total
}

// ev is a figure of evidence.
func ev(label string, v float64, unit string) model.Evidence {
	return model.Evidence{Label: label, Value: v, Unit: unit}
}
