// Package baseline compares a check with an earlier report of the same
// database (check --baseline): each finding is NEW, PERSISTING or
// RESOLVED by its id (model.Finding.Identity), and each statement that
// got slower or faster between the two is listed with what changed (time,
// buffers and rows per call, plan). A slowdown is a regression only once
// re-measured, where the statement can be run again: the figures of two
// reports differ for reasons that are not the statement's (a cold cache,
// a busy minute), and a gate that fails on noise is switched off.
package baseline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/plan"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// Thresholds of a statement change: a mean per call 1.5x apart and at
// least half a millisecond apart; buffers per call doubled and at least
// 100 more (and so for temporary blocks written); rows per call doubled or
// halved and at least 10 apart; JIT's share of the time up 20 points. Calls
// below MinCalls on either side say too little of a mean.
const (
	JITShareRise = 0.2
	TimeRatio    = 1.5
	TimeMinMS    = 0.5
	BufferRatio  = 2.0
	BufferMin    = 100
	RowsRatio    = 2.0
	RowsMinDelta = 10
	MinCalls     = 3
)

// Old is the baseline: the findings and statements of a report pgmedic
// wrote.
type Old struct {
	Path        string
	PGMedic     string
	Target      model.Target
	CollectedAt time.Time
	Findings    []model.Finding
	Statements  []model.StatementRow
	Plans       map[string]*plan.Flat
}

// Load reads a report pgmedic wrote as JSON: check's (and the report inside
// a `lab run` or `demo` result, or a watch bundle's check), logs' or
// explain's. Anything else is refused with what to give instead.
func Load(data []byte, path string) (*Old, error) {
	var top any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("--baseline %s is not JSON (%s): give a report written by pgmedic check --format json", path, notJSON(data, err))
	}
	old := &Old{Path: path}
	found := false
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["findings"].([]any); ok {
				found = true
				// The fields of a check's report (report.Report) that a
				// baseline reads; baseline does not import the renderer.
				var part struct {
					PGMedic     string                `json:"pgmedic"`
					Target      model.Target          `json:"target"`
					CollectedAt time.Time             `json:"collected_at"`
					Findings    []model.Finding       `json:"findings"`
					Statements  []model.StatementRow  `json:"statements"`
					Plans       map[string]*plan.Flat `json:"plans"`
				}
				b, _ := json.Marshal(x)
				if err := json.Unmarshal(b, &part); err != nil {
					return fmt.Errorf("--baseline %s: its findings cannot be read (%v); was it written by another program?", path, shortErr(err))
				}
				old.Findings = append(old.Findings, part.Findings...)
				old.Statements = append(old.Statements, part.Statements...)
				if old.PGMedic == "" {
					old.PGMedic, old.Target, old.CollectedAt = part.PGMedic, part.Target, part.CollectedAt
				}
				for k, p := range part.Plans {
					if old.Plans == nil {
						old.Plans = map[string]*plan.Flat{}
					}
					old.Plans[k] = p
				}
				return nil
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if err := walk(x[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(top); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("--baseline %s holds no findings: give a report written by pgmedic check --format json (or lab run, logs, explain)", path)
	}
	for i := range old.Findings {
		// Ids are recomputed: a report of an older pgmedic named its
		// findings another way.
		old.Findings[i].ID = old.Findings[i].Identity()
	}
	return old, nil
}

// notJSON says what a file that is not JSON looks like instead, in a
// person's words rather than the decoder's ("invalid character 'a' in
// literal null"): empty, cut short, or text of another kind. None of its
// content is quoted: it may be data.
func notJSON(data []byte, err error) string {
	trimmed := bytes.TrimSpace(data)
	var syntax *json.SyntaxError
	switch {
	case len(trimmed) == 0:
		return "it is empty"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "it ends before its first value does: cut short?"
	case trimmed[0] != '{' && trimmed[0] != '[':
		line, _, _ := bytes.Cut(trimmed, []byte("\n"))
		if bytes.Count(line, []byte(",")) >= 2 || bytes.Count(line, []byte(";")) >= 2 {
			return "it reads as a table of comma- or semicolon-separated values, a CSV"
		}
		return "its first character is not the { or [ a JSON report starts with"
	case errors.As(err, &syntax):
		return fmt.Sprintf("it stops being JSON at byte %d", syntax.Offset)
	}
	return shortErr(err)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// Compare sets the findings and statements of cur against the baseline's.
// Only findings at or above min count on either side, so a finding the
// baseline kept at info that is now a warning is NEW at warning.
func Compare(old *Old, cur []model.Finding, stmts []model.StatementRow, plans map[string]*plan.Flat, min model.Severity) *Diff {
	d := &Diff{Baseline: old.Path, BaselineAt: old.CollectedAt, Findings: []FindingChange{}, Statements: []StatementChange{}}
	before := map[string]model.Finding{}
	for _, f := range old.Findings {
		if f.Severity >= min {
			before[f.ID] = f
		}
	}
	seen := map[string]bool{}
	for _, f := range cur {
		if f.Severity < min {
			continue
		}
		f.ID = f.Identity()
		if seen[f.ID] {
			// Two sessions running the same statement are one problem.
			continue
		}
		seen[f.ID] = true
		if was, ok := before[f.ID]; ok {
			c := FindingChange{Status: StatusPersisting, Finding: f}
			if was.Severity != f.Severity {
				c.Was = was.Severity.String()
			}
			d.Findings = append(d.Findings, c)
			d.Counts.Persisting++
			continue
		}
		d.Findings = append(d.Findings, FindingChange{Status: StatusNew, Finding: f})
		d.Counts.New++
	}
	for _, f := range old.Findings {
		if f.Severity >= min && !seen[f.ID] {
			seen[f.ID] = true
			d.Findings = append(d.Findings, FindingChange{Status: StatusResolved, Finding: f})
			d.Counts.Resolved++
		}
	}
	order := map[string]int{StatusNew: 0, StatusPersisting: 1, StatusResolved: 2}
	sort.SliceStable(d.Findings, func(i, j int) bool { return order[d.Findings[i].Status] < order[d.Findings[j].Status] })
	d.Statements = compareStatements(old, stmts, plans)
	recount(d)
	return d
}

// key matches a statement across reports: its fingerprint and role, or
// its queryid in a report written before statements had fingerprints.
func key(r model.StatementRow) string {
	if r.Fingerprint != "" {
		return r.Fingerprint + "\x00" + r.Role
	}
	return "queryid:" + r.QueryID
}

func figures(r model.StatementRow) Figures {
	return Figures{Calls: r.Calls, MeanMS: r.MeanMS, BuffersPerCall: r.BuffersPerCall, RowsPerCall: r.RowsPerCall,
		TempPerCall: r.TempPerCall, JITShare: r.JITShare, Plan: r.PlanShape}
}

// compareStatements lists the statements whose figures moved beyond the
// thresholds, the largest change of time first.
func compareStatements(old *Old, now []model.StatementRow, plans map[string]*plan.Flat) []StatementChange {
	before := map[string]model.StatementRow{}
	for _, r := range old.Statements {
		if _, dup := before[key(r)]; !dup {
			before[key(r)] = r
		}
	}
	out := []StatementChange{}
	for _, r := range now {
		b, ok := before[key(r)]
		if !ok && r.Fingerprint != "" {
			b, ok = before["queryid:"+r.QueryID]
		}
		if !ok || b.Calls < MinCalls || r.Calls < MinCalls {
			continue
		}
		c := StatementChange{Fingerprint: r.Fingerprint, QueryID: r.QueryID, Query: r.Query, Role: r.Role, Before: figures(b), After: figures(r)}
		if b.MeanMS > 0 {
			c.Ratio = r.MeanMS / b.MeanMS
		}
		slower, faster := judge(&c)
		switch {
		case slower && sameWork(c.Before, c.After):
			c.Verdict = Slower
			c.Note = "not a regression: the same plan, and the same buffers, rows and temporary blocks per call as in the baseline; the statement does the same work, and its time moved with the server (its load, its cache, lock waits)"
		case slower:
			c.Verdict, c.Regression = Slower, true
		case faster:
			c.Verdict = Faster
		case len(c.Reasons) > 0:
			c.Verdict = Changed
		default:
			continue
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return math.Abs(math.Log(max(out[i].Ratio, 1e-9))) > math.Abs(math.Log(max(out[j].Ratio, 1e-9)))
	})
	return out
}

// judge fills the reasons of a statement change and says whether its
// figures make it slower or faster.
func judge(c *StatementChange) (slower, faster bool) {
	b, a := c.Before, c.After
	switch {
	case b.MeanMS > 0 && a.MeanMS >= TimeRatio*b.MeanMS && a.MeanMS-b.MeanMS >= TimeMinMS:
		slower = true
		c.Reasons = append(c.Reasons, fmt.Sprintf("mean per call %s -> %s (%.1fx)", printable.MS(b.MeanMS), printable.MS(a.MeanMS), a.MeanMS/b.MeanMS))
	case a.MeanMS > 0 && b.MeanMS >= TimeRatio*a.MeanMS && b.MeanMS-a.MeanMS >= TimeMinMS:
		faster = true
		c.Reasons = append(c.Reasons, fmt.Sprintf("mean per call %s -> %s (%.1fx faster)", printable.MS(b.MeanMS), printable.MS(a.MeanMS), b.MeanMS/a.MeanMS))
	}
	switch {
	case grew(b.BuffersPerCall, a.BuffersPerCall):
		c.Reasons = append(c.Reasons, fmt.Sprintf("buffers per call %.0f -> %.0f", b.BuffersPerCall, a.BuffersPerCall))
		slower = slower || !faster
	case grew(a.BuffersPerCall, b.BuffersPerCall):
		c.Reasons = append(c.Reasons, fmt.Sprintf("buffers per call %.0f -> %.0f", b.BuffersPerCall, a.BuffersPerCall))
		faster = faster || !slower
	}
	if grew(b.TempPerCall, a.TempPerCall) {
		c.Reasons = append(c.Reasons, fmt.Sprintf("temporary blocks written per call %.0f -> %.0f", b.TempPerCall, a.TempPerCall))
		slower = slower || !faster
	}
	if a.JITShare-b.JITShare >= JITShareRise {
		c.Reasons = append(c.Reasons, fmt.Sprintf("JIT's share of its time %.0f%% -> %.0f%%", 100*b.JITShare, 100*a.JITShare))
	}
	if rowsMoved(b.RowsPerCall, a.RowsPerCall) {
		c.Reasons = append(c.Reasons, fmt.Sprintf("rows per call %.4g -> %.4g", b.RowsPerCall, a.RowsPerCall))
	}
	if b.Plan != "" && a.Plan != "" && b.Plan != a.Plan {
		c.Reasons = append(c.Reasons, "plan changed: "+printable.Clip(b.Plan, 160)+" -> "+printable.Clip(a.Plan, 160))
	}
	return slower, faster
}

// grew says a per-call count of blocks rose past both thresholds.
func grew(before, after float64) bool {
	return after >= BufferRatio*before && after-before >= BufferMin
}

// rowsMoved says the rows per call doubled or halved, at least
// RowsMinDelta apart.
func rowsMoved(before, after float64) bool {
	hi, lo := max(before, after), min(before, after)
	return hi >= RowsRatio*lo && hi-lo >= RowsMinDelta
}

// sameWork says the statement does what it did in the baseline: the same
// generic plan (both known), and neither its shared buffers nor its
// temporary blocks nor its rows per call nor JIT's share moved past their
// thresholds, either way. Its time can still differ, with the load of the
// server, what its cache holds, the locks it waits for; compared across
// two moments, that is the machine's change, not the statement's, and a
// CI gate that failed on it would fail on a busy runner.
func sameWork(b, a Figures) bool {
	if b.Plan == "" || b.Plan != a.Plan {
		return false
	}
	return !grew(b.BuffersPerCall, a.BuffersPerCall) && !grew(a.BuffersPerCall, b.BuffersPerCall) &&
		!grew(b.TempPerCall, a.TempPerCall) && !rowsMoved(b.RowsPerCall, a.RowsPerCall) && a.JITShare-b.JITShare < JITShareRise
}

// Settle re-measures each regression with measure (nil: none could be
// run) and keeps it only where the re-run still shows it:
// the median now at least TimeRatio times the baseline's mean, or, when the
// baseline's plan could be brought back, the current plan at least
// TimeRatio times slower than that plan on the same values.
func Settle(d *Diff, measure func(StatementChange) *model.Remeasured) {
	for i := range d.Statements {
		c := &d.Statements[i]
		if !c.Regression || measure == nil {
			continue
		}
		r := measure(*c)
		if r == nil {
			continue
		}
		c.Remeasured = r
		if r.Why != "" {
			continue
		}
		c.Measured = true
		base, how := c.Before.MeanMS, "the baseline's mean"
		if r.BaselinePlanMS > 0 {
			base, how = r.BaselinePlanMS, "the baseline's plan re-run with the same values"
		}
		if base <= 0 || r.MedianMS < TimeRatio*base || r.MedianMS-base < TimeMinMS {
			if c.Before.BuffersPerCall == 0 || c.After.BuffersPerCall < BufferRatio*c.Before.BuffersPerCall || r.BaselinePlanMS > 0 {
				c.Regression = false
				c.Note = fmt.Sprintf("not a regression: re-run now it takes %s against %s for %s", printable.MS(r.MedianMS), printable.MS(base), how)
			}
		}
	}
	recount(d)
}

func recount(d *Diff) {
	d.Counts.Slower, d.Counts.Regressions, d.Counts.Faster = 0, 0, 0
	for _, c := range d.Statements {
		switch c.Verdict {
		case Slower:
			d.Counts.Slower++
			if c.Regression {
				d.Counts.Regressions++
			}
		case Faster:
			d.Counts.Faster++
		}
	}
}
