package report

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pgmedic/pgmedic/internal/logs"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// LogsReport is `pgmedic logs`' output: the summary and the findings on
// the executed plans and the log's events.
type LogsReport struct {
	PGMedic string
	*logs.Summary
	Findings []model.Finding
	Skipped  []model.Skip
}

// logsStatement is one statement of the logs report's JSON, with its
// figures computed.
type logsStatement struct {
	*logs.StatementStats
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	First  string  `json:"first_seen,omitempty"`
	Last   string  `json:"last_seen,omitempty"`
}

// MarshalJSON is the summary's JSON with each statement's figures and the
// findings beside it (the page's data block holds the same), in one pass.
func (r *LogsReport) MarshalJSON() ([]byte, error) {
	out := struct {
		*logs.Summary
		Statements []logsStatement `json:"statements"`
		Findings   []model.Finding `json:"findings"`
		Skipped    []model.Skip    `json:"skipped"`
	}{Summary: r.Summary, Statements: []logsStatement{}, Findings: r.Findings, Skipped: r.Skipped}
	if out.Findings == nil {
		out.Findings = []model.Finding{}
	}
	if out.Skipped == nil {
		out.Skipped = []model.Skip{}
	}
	for _, st := range r.Summary.Statements {
		x := logsStatement{StatementStats: st, MeanMS: st.TotalMS / float64(max(st.Count-st.Untimed, 1)), P50MS: st.P50, P95MS: st.P95, P99MS: st.P99}
		if !st.First.IsZero() {
			x.First, x.Last = st.First.Format("2006-01-02T15:04:05Z"), st.Last.Format("2006-01-02T15:04:05Z")
		}
		out.Statements = append(out.Statements, x)
	}
	return json.Marshal(out)
}

// JSON writes the logs report's JSON, indented.
func (r *LogsReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Text writes the summary and the findings for a terminal.
func (r *LogsReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	s := r.Summary
	logsFiles(b, s)
	logsStatements(b, s)
	logsErrors(b, s)
	logsEvents(b, s)
	logsMaintenance(b, s)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(r.Findings) == 0 && len(r.Skipped) == 0 {
		return nil
	}
	rep := &Report{Findings: r.Findings, Skipped: r.Skipped}
	if _, err := io.WriteString(w, "\n== FINDINGS (from the log's events and its "+strconv.Itoa(len(s.Plans()))+" executed plans from auto_explain) ==\n"); err != nil {
		return err
	}
	return rep.FindingsText(w)
}

// logsFiles says how each file was read, and the span the log covers.
func logsFiles(b *strings.Builder, s *logs.Summary) {
	for _, f := range s.Files {
		format := string(f.Format)
		if format == "" {
			format = "not read"
		}
		fmt.Fprintf(b, "%s: %s", safe(f.Name), format)
		if f.Prefix != "" {
			fmt.Fprintf(b, " (log_line_prefix %q)", f.Prefix)
		}
		fmt.Fprintf(b, ", %d lines, %d entries, %d lines not recognised", f.Lines, f.Entries, f.Unrecognised)
		if f.Other > 0 {
			fmt.Fprintf(b, ", %d lines of another program (left out)", f.Other)
		}
		b.WriteString("\n")
		if f.Partial {
			fmt.Fprintf(b, "  PARTLY UNDERSTOOD: %.0f%% of the lines were not recognised, so every count below misses them: give the server's log_line_prefix with --prefix, or the format with --format-in\n",
				100*float64(f.Unrecognised)/float64(max(f.Lines, 1)))
		}
		for _, ex := range f.Examples {
			fmt.Fprintf(b, "  not recognised: %s\n", safe(ex))
		}
		if f.Error != "" {
			fmt.Fprintf(b, "  error: %s\n", safe(f.Error))
		}
	}
	if !s.First.IsZero() {
		fmt.Fprintf(b, "from %s to %s\n", s.First.Format("2006-01-02 15:04:05"), s.Last.Format("2006-01-02 15:04:05 MST"))
	}
}

// logsStatements lists the 20 statements with the most time.
func logsStatements(b *strings.Builder, s *logs.Summary) {
	if len(s.Statements) == 0 {
		return
	}
	b.WriteString("\n== STATEMENTS (by total duration) ==\n")
	fmt.Fprintf(b, "  %8s %10s %9s %9s %9s %9s %9s  %s\n", "calls", "total ms", "mean", "p50", "p95", "p99", "max", "statement")
	for i, st := range s.Statements {
		if i == 20 {
			fmt.Fprintf(b, "  ... and %d more (in the JSON report)\n", len(s.Statements)-20)
			break
		}
		q := printable.Trim(strings.Join(strings.Fields(st.Query), " "), 100, "...")
		fmt.Fprintf(b, "  %8d %10.1f %9.2f %9.2f %9.2f %9.2f %9.2f  %s\n", st.Count, st.TotalMS, st.TotalMS/float64(max(st.Count-st.Untimed, 1)), st.P50, st.P95, st.P99, st.MaxMS, safe(q))
		if st.Example != "" && printable.Clip(st.Example, len(st.Example)) != printable.Clip(st.Query, len(st.Query)) {
			fmt.Fprintf(b, "  %8s slowest: %s\n", "", safe(printable.Clip(st.Example, 200)))
		}
	}
}

// logsErrors lists the 15 most frequent kinds of error.
func logsErrors(b *strings.Builder, s *logs.Summary) {
	if len(s.Errors) == 0 {
		return
	}
	b.WriteString("\n== ERRORS ==\n")
	for i, e := range s.Errors {
		if i == 15 {
			break
		}
		fmt.Fprintf(b, "  %6d %-6s %-5s %s\n", e.Count, e.Level, e.SQLState, safe(e.Pattern))
		if e.Example != "" && e.Example != e.Pattern {
			fmt.Fprintf(b, "  %6s %-6s %-5s e.g. %s\n", "", "", "", safe(printable.Clip(e.Example, 200)))
		}
	}
}

// logsEvents counts the log's events, its lock waits and temporary files.
func logsEvents(b *strings.Builder, s *logs.Summary) {
	if len(s.Events) == 0 {
		return
	}
	b.WriteString("\n== EVENTS ==\n")
	for _, k := range slices.Sorted(maps.Keys(s.Events)) {
		fmt.Fprintf(b, "  %-28s %d\n", k, s.Events[k])
	}
	if s.LockWaitMS > 0 {
		fmt.Fprintf(b, "  %-28s %.0f ms\n", "lock wait reported", s.LockWaitMS)
	}
	if s.TempBytes > 0 {
		fmt.Fprintf(b, "  %-28s %.1f MB\n", "temporary files written", float64(s.TempBytes)/(1<<20))
	}
}

// logsMaintenance is the checkpointer's and autovacuum's lines.
func logsMaintenance(b *strings.Builder, s *logs.Summary) {
	if len(s.Checkpoint) > 0 {
		b.WriteString("\n== CHECKPOINTS ==\n")
		for _, k := range slices.Sorted(maps.Keys(s.Checkpoint)) {
			fmt.Fprintf(b, "  started (%s)%s %d\n", safe(k), strings.Repeat(" ", max(0, 30-len(k))), s.Checkpoint[k])
		}
		c := s.Checkpoints
		if c.MedianIntervalS > 0 {
			fmt.Fprintf(b, "  %-40s %.1f s\n", "median time between starts", c.MedianIntervalS)
		}
		if c.Completed > 0 {
			fmt.Fprintf(b, "  %-40s %.1f MB\n", "mean WAL between checkpoints", c.DistanceKB/float64(c.Completed)/1024)
		}
		if c.TooFrequent > 0 {
			fmt.Fprintf(b, "  %-40s %d\n", "\"occurring too frequently\" warnings", c.TooFrequent)
		}
	}
	if len(s.Tables) == 0 {
		return
	}
	b.WriteString("\n== AUTOVACUUM AND AUTOANALYZE (by table) ==\n")
	fmt.Fprintf(b, "  %8s %8s %12s %14s  %s\n", "vacuums", "analyzes", "dead removed", "not removable", "table")
	for _, k := range slices.Sorted(maps.Keys(s.Tables)) {
		t := s.Tables[k]
		fmt.Fprintf(b, "  %8d %8d %12d %14d  %s\n", t.Vacuums, t.Analyzes, t.Removed, t.NotRemovable, safe(k))
	}
}
