package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// ProfileReport is `pgmedic profile`'s document: where the CPU went, by
// kind, statement and frame, the findings, and the folded stacks the
// flame graph is drawn from.
type ProfileReport struct {
	PGMedic    string          `json:"pgmedic"`
	Target     string          `json:"target"`
	Seconds    float64         `json:"seconds"`
	Samples    int64           `json:"samples"`
	SampleMS   float64         `json:"sample_ms"`
	Kinds      []KindRow       `json:"kinds"`
	Statements []ProfileStmt   `json:"statements"`
	TopFrames  []FrameRow      `json:"top_frames"`
	Findings   []model.Finding `json:"findings"`
	Skipped    []model.Skip    `json:"skipped"`
	Summary    Summary         `json:"summary"`
	// Folded is the stacks, "root;...;leaf" with their sample counts, and
	// FlameSVG the flame graph drawn from them (for the page).
	Folded   map[string]int64 `json:"folded"`
	FlameSVG string           `json:"-"`
	// Compare, when the fix was measured, is the second profile's kinds.
	Unread int64 `json:"unrecognised_lines,omitempty"`
}

// KindRow is one kind of hot spot's share.
type KindRow struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Samples int64    `json:"samples"`
	Share   float64  `json:"share"`
	Frames  []string `json:"hot_frames,omitempty"`
}

// ProfileStmt is a statement's share of the samples.
type ProfileStmt struct {
	QueryID string  `json:"queryid"`
	Query   string  `json:"query"`
	Samples int64   `json:"samples"`
	Share   float64 `json:"share"`
}

// FrameRow is a function's self samples (it was the leaf).
type FrameRow struct {
	Name    string  `json:"name"`
	Samples int64   `json:"samples"`
	Share   float64 `json:"share"`
}

// ProfileInput is what a profile's report is built from: the samples,
// their folded stacks and flame graph, the kinds of hot spot with their
// shares, and how a frame is named (diagnose computes them; the report
// only lays them out).
type ProfileInput struct {
	Profile   model.Profile
	Folded    map[string]int64
	FlameSVG  string
	Kinds     []KindRow
	FrameName func(model.Frame) string
}

// NewProfile builds the report of a profile.
func NewProfile(version string, in ProfileInput, findings []model.Finding, skipped []model.Skip, least model.Severity) *ProfileReport {
	p := in.Profile
	r := &ProfileReport{PGMedic: version, Target: p.Target, Seconds: model.Round(p.Seconds, 2), Samples: p.Samples, SampleMS: model.Round(p.SampleMS, 3),
		Findings: []model.Finding{}, Skipped: skipped, Folded: in.Folded, FlameSVG: in.FlameSVG, Kinds: []KindRow{}, Statements: []ProfileStmt{}, TopFrames: []FrameRow{}}
	if r.Skipped == nil {
		r.Skipped = []model.Skip{}
	}
	share := func(n int64) float64 {
		if p.Samples == 0 {
			return 0
		}
		return model.Round(float64(n)/float64(p.Samples), 4)
	}
	for _, k := range in.Kinds {
		if k.Samples > 0 {
			r.Kinds = append(r.Kinds, k)
		}
	}
	sort.SliceStable(r.Kinds, func(i, j int) bool { return r.Kinds[i].Samples > r.Kinds[j].Samples })
	stmts := map[string]*ProfileStmt{}
	self := map[string]int64{}
	for _, s := range p.Stacks {
		if s.QueryID != "" {
			st := stmts[s.QueryID]
			if st == nil {
				st = &ProfileStmt{QueryID: s.QueryID, Query: s.Query}
				stmts[s.QueryID] = st
			}
			st.Samples += s.Count
		}
		if len(s.Frames) > 0 {
			self[in.FrameName(s.Frames[0])] += s.Count
		}
	}
	for _, st := range stmts {
		st.Share = share(st.Samples)
		r.Statements = append(r.Statements, *st)
	}
	sort.Slice(r.Statements, func(i, j int) bool { return r.Statements[i].Samples > r.Statements[j].Samples })
	for name, n := range self {
		r.TopFrames = append(r.TopFrames, FrameRow{Name: name, Samples: n, Share: share(n)})
	}
	sort.Slice(r.TopFrames, func(i, j int) bool {
		a, b := r.TopFrames[i], r.TopFrames[j]
		return a.Samples > b.Samples || a.Samples == b.Samples && a.Name < b.Name
	})
	if len(r.TopFrames) > 15 {
		r.TopFrames = r.TopFrames[:15]
	}
	r.Summary = summarize(findings, 1)
	for _, f := range findings {
		if f.Severity >= least {
			r.Findings = append(r.Findings, f)
		}
	}
	return r
}

// JSON writes the report as JSON.
func (r *ProfileReport) JSON(w io.Writer) error { return writeJSON(w, r) }

// Worst is the most severe finding reported.
func (r *ProfileReport) Worst() model.Severity { return worstOf(r.Findings) }

// Document is the profile as a one-part document.
func (r *ProfileReport) Document() *Document {
	return &Document{PGMedic: r.PGMedic, Title: "pgmedic profile " + r.Target, Parts: []Part{{Profile: r}}}
}

// Text writes the profile for a terminal.
func (r *ProfileReport) Text(w io.Writer) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "pgmedic %s — profile of %s: %d samples in %.1f s", r.PGMedic, safe(r.Target), r.Samples, r.Seconds)
	if r.SampleMS > 0 {
		fmt.Fprintf(b, " (one every %.2f ms of CPU)", r.SampleMS)
	}
	b.WriteString("\n")
	if r.Unread > 0 {
		fmt.Fprintf(b, "%d lines of perf's output were not understood\n", r.Unread)
	}
	if len(r.Kinds) > 0 {
		b.WriteString("\n== WHERE THE CPU WENT (share of samples with the kind anywhere in the stack) ==\n")
		for _, k := range r.Kinds {
			fmt.Fprintf(b, "  %6.1f%%  %-48s %s\n", 100*k.Share, k.Name, safe(strings.Join(k.Frames, ", ")))
		}
	}
	if len(r.Statements) > 0 {
		b.WriteString("\n== BY STATEMENT (pg_stat_activity at each sample) ==\n")
		for i, s := range r.Statements {
			if i == 10 {
				break
			}
			fmt.Fprintf(b, "  %6.1f%%  %-20s %s\n", 100*s.Share, s.QueryID, safe(printable.Clip(s.Query, 100)))
		}
	}
	if len(r.TopFrames) > 0 {
		b.WriteString("\n== HOTTEST FUNCTIONS (samples where it was the running function) ==\n")
		for _, f := range r.TopFrames {
			fmt.Fprintf(b, "  %6.1f%%  %s\n", 100*f.Share, safe(f.Name))
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(r.Findings) == 0 && len(r.Skipped) == 0 {
		_, err := io.WriteString(w, "\nNo finding at or above the severity shown (a kind of hot spot is reported from a tenth of the samples).\n")
		return err
	}
	io.WriteString(w, "\n")
	rep := &Report{Findings: r.Findings, Skipped: r.Skipped}
	return rep.FindingsText(w)
}
