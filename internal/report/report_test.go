package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

func sample() *Report {
	findings := []model.Finding{
		{Rule: "jit-overhead", Severity: model.Critical, Title: "JIT compilation costs 41x the query's own execution",
			Object:   model.Object{Kind: "statement", Name: "SELECT o.id FROM orders o WHERE o.customer_id = $1", QueryID: "-319", Role: "app", Database: "shop"},
			Evidence: []model.Evidence{{Label: "JIT total per call", Value: 81.49, Unit: "ms"}, {Label: "calls", Value: 16}, {Label: "jit for role app is on (default)", Value: 1, Fact: true}},
			Impact:   model.Impact{Summary: "98% of this database's statement time", Share: 0.98},
			Fix:      model.Fix{Summary: "turn JIT off for role app", SQL: "ALTER ROLE app IN DATABASE shop SET jit = off;"},
			Verification: model.Verification{Status: model.Confirmed, Method: "EXPLAIN ANALYZE x5 each",
				Before: &model.Measure{Value: 734, Unit: "ms"}, After: &model.Measure{Value: 7.34, Unit: "ms"}},
			Docs: "docs/rules/jit-overhead.md"},
		{Rule: "jit-overhead", Severity: model.Info, Title: "JIT is armed", Object: model.Object{Kind: "setting", Name: "jit"},
			Verification: model.Verification{Status: model.NotRun, Reason: "nothing to measure"}, Docs: "docs/rules/jit-overhead.md"},
	}
	skipped := []model.Skip{{Rule: "driver-introspection", Reason: "pg_stat_statements is not installed", Fix: "CREATE EXTENSION pg_stat_statements;"}}
	return New("test", envelope.Target{Host: "127.0.0.1", Port: 5432, Database: "shop", User: "me", ServerVersion: "15.20"},
		time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), findings, skipped, 2, model.Warning)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, "testdata/"+name, got)
}

func TestTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := sample().Text(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", b.Bytes())
}

func TestJSONGolden(t *testing.T) {
	var b bytes.Buffer
	if err := sample().JSON(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", b.Bytes())
}

func TestMinSeverityAndSummary(t *testing.T) {
	r := sample()
	if len(r.Findings) != 1 || r.Findings[0].Severity != model.Critical {
		t.Fatalf("min-severity filter kept %d findings", len(r.Findings))
	}
	if r.Summary.Critical != 1 || r.Summary.Info != 1 || r.Summary.Confirmed != 1 || r.Summary.NotRun != 1 {
		t.Errorf("summary counts every finding: %+v", r.Summary)
	}
	if r.Worst() != model.Critical {
		t.Errorf("Worst = %s", r.Worst())
	}
	all := New("test", r.Target, r.CollectedAt, append(r.Findings, model.Finding{Rule: "x", Severity: model.Info}), nil, 2, model.Info)
	if len(all.Findings) != 2 || len(all.Filter(model.Warning).Findings) != 1 || all.Filter(model.Warning).Summary.Info != 1 {
		t.Errorf("Filter narrows the findings but keeps the summary")
	}
}

// TestUnseenHeadsEveryFormat: what check could not see comes first in
// text, Markdown and HTML, with how much and the grant; with nothing
// found, the text says it is not an all-clear, and only blocking entries
// make the report incomplete.
func TestUnseenHeadsEveryFormat(t *testing.T) {
	r := New("test", envelope.Target{Host: "db", Port: 5432, Database: "shop", User: "ro"}, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), nil, nil, 13, model.Warning)
	r.Unseen = []model.Unseen{
		{What: "statements of other roles (pg_stat_statements shows their time, not their text)", Count: 30, Share: 0.54, Fix: "GRANT pg_read_all_stats TO ro;", Blocks: true},
		{What: "the server log (server log not read: permission denied)", Share: -1, Fix: "GRANT pg_read_server_files TO ro;"},
	}
	var text, md, page bytes.Buffer
	if err := r.Text(&text); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, r.Document()); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, r.Document()); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(text.Bytes(), []byte("\n"))
	if len(lines) < 4 || !bytes.Contains(lines[2], []byte("could not see all of this database")) ||
		!bytes.Contains(lines[3], []byte("30 statements of other roles")) || !bytes.Contains(lines[3], []byte("54% of the statement time")) {
		t.Errorf("text does not start with what check could not see:\n%s", text.String())
	}
	if !bytes.Contains(text.Bytes(), []byte("not an all-clear")) || !bytes.Contains(text.Bytes(), []byte("GRANT pg_read_all_stats TO ro;")) {
		t.Errorf("text:\n%s", text.String())
	}
	for name, out := range map[string][]byte{"markdown": md.Bytes(), "html": page.Bytes()} {
		if !bytes.Contains(out, []byte("could not see all of this database")) || !bytes.Contains(out, []byte("GRANT pg_read_all_stats TO ro;")) {
			t.Errorf("%s lacks the unseen headline", name)
		}
	}
	if !r.Incomplete() {
		t.Error("a blocking entry does not make the report incomplete")
	}
	r.Unseen = r.Unseen[1:]
	if r.Incomplete() {
		t.Error("the server log alone makes the report incomplete")
	}
}

// TestIncidentGapsSaid: a bundle's window that holds an outage says so
// at the head of the report, in text and Markdown.
func TestIncidentGapsSaid(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	r := New("test", model.Target{Host: "db"}, at, nil, nil, 3, model.Warning)
	r.Incident = &IncidentHeader{Bundle: "b", Triggers: []string{"lock-queue: 3 waiting"}, From: at, To: at.Add(time.Minute),
		Gaps: []string{"not connected from 10:00:10 to 10:00:27: the server restarted"}}
	for _, format := range []string{"text", "markdown"} {
		var b strings.Builder
		if err := Render(&b, r, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "10:00:27: the server restarted") || !strings.Contains(strings.ToLower(b.String()), "gap") {
			t.Errorf("%s does not say the gap:\n%s", format, b.String())
		}
	}
}
