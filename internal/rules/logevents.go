package rules

import (
	"github.com/pgmedic/pgmedic/internal/model"
)

// LogInput is what a server log gives the rules: the events it counted
// (connections, lock waits, checkpoints, autovacuum runs) and the scans
// of its executed plans whose row estimates were far off. The plans
// themselves go through the plan rules (RunPlan).
type LogInput struct {
	Events       model.LogEvents
	Misestimates []LogMisestimate
	// Name is what the findings' object is called ("the server log").
	Name string
}

var loggedVerification = model.NotRunBecause("counted in the server log")

func logObject(in LogInput) model.Object {
	return model.Object{Kind: "log", Name: in.Name, Database: in.Name}
}

func ev2(label string, n int64) model.Evidence {
	return model.Evidence{Label: label, Value: float64(n)}
}
