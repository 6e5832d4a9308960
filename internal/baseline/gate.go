package baseline

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
)

// DefaultGate is what fails a check with --baseline and no --fail-on: a
// finding at warning or above that the baseline did not have, or a
// statement whose slowdown stands.
const DefaultGate = "new:warning,regression"

// Gate is a parsed --fail-on: the conditions that make the check exit 1.
type Gate []condition

type condition struct {
	status     string // StatusNew, StatusPersisting, or "" for any finding
	min        model.Severity
	regression bool
}

// ParseGate reads --fail-on: a comma-separated list of new:SEVERITY,
// persisting:SEVERITY, any:SEVERITY and regression; "none" never fails.
func ParseGate(spec string) (Gate, error) {
	var g Gate
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(strings.ToLower(part))
		switch part {
		case "":
			continue
		case "none":
			return Gate{}, nil
		case "regression", "regressions":
			g = append(g, condition{regression: true})
			continue
		}
		which, sev, ok := strings.Cut(part, ":")
		if !ok {
			sev, which = part, "any"
		}
		min, err := model.ParseSeverity(sev)
		if err != nil {
			return nil, fmt.Errorf("--fail-on %q: %q is not a severity (info, warning or critical)", part, sev)
		}
		switch which {
		case "new":
			g = append(g, condition{status: StatusNew, min: min})
		case "persisting":
			g = append(g, condition{status: StatusPersisting, min: min})
		case "any":
			g = append(g, condition{min: min})
		default:
			return nil, fmt.Errorf("--fail-on %q: say new:SEVERITY, persisting:SEVERITY, any:SEVERITY, regression or none", part)
		}
	}
	if g == nil {
		return nil, fmt.Errorf("--fail-on is empty: say new:warning, regression, none, ...")
	}
	return g, nil
}

// Failures says, one line each, which conditions the comparison meets;
// none means the gate passes.
func (g Gate) Failures(d *Diff) []string {
	var out []string
	for _, c := range g {
		if c.regression {
			if d.Counts.Regressions > 0 {
				out = append(out, regressionsText(d))
			}
			continue
		}
		n := 0
		for _, ch := range d.Findings {
			if ch.Status == StatusResolved || ch.Finding.Severity < c.min {
				continue
			}
			if c.status == "" || ch.Status == c.status {
				n++
			}
		}
		if n > 0 {
			what := "finding(s)"
			if c.status != "" {
				what = strings.ToLower(c.status) + " " + what
			}
			out = append(out, fmt.Sprintf("%d %s at %s or above", n, what, c.min))
		}
	}
	return out
}

// regressionsText says how each regression was judged: re-run and still
// slower, or on the two reports' figures where it could not be re-run (a
// write, no server, --no-verify). Never "re-run" for what was not.
func regressionsText(d *Diff) string {
	rerun, figures := 0, 0
	for _, s := range d.Statements {
		if !s.Regression {
			continue
		}
		if s.Measured {
			rerun++
		} else {
			figures++
		}
	}
	var parts []string
	if rerun > 0 {
		parts = append(parts, fmt.Sprintf("%d got slower and stayed slower when re-run", rerun))
	}
	if figures > 0 {
		parts = append(parts, fmt.Sprintf("%d got slower by the two reports' figures (not re-run: a write, or nothing could run)", figures))
	}
	return fmt.Sprintf("%d statement(s) regressed: %s", rerun+figures, strings.Join(parts, "; "))
}
