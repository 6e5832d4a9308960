package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/pgversion"
	"github.com/pgmedic/pgmedic/internal/testkit"
)

const fixtures = "../plan/testdata/pg15/"

func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", "explain", name), []byte(got))
}

// TestExplainGolden: the text report of real plans, one per rule family,
// and a comparison across formats.
func TestExplainGolden(t *testing.T) {
	for _, c := range []struct {
		golden string
		args   []string
		code   int
	}{
		{"implicit-cast.txt", []string{"explain", fixtures + "implicit-cast.bad.txt"}, ExitFindings},
		{"hash-batches.txt", []string{"explain", fixtures + "hash-batches.bad.json"}, ExitFindings},
		{"nested-loop.txt", []string{"explain", fixtures + "nested-loop-blowup.bad.txt"}, ExitFindings},
		{"subplans.txt", []string{"explain", fixtures + "subplans.txt"}, ExitFindings},
		{"costs-only.txt", []string{"explain", fixtures + "costs-only.txt"}, ExitOK},
		{"compare-index.txt", []string{"explain", "--compare", fixtures + "missing-index.bad.json", fixtures + "missing-index.good.txt"}, ExitOK},
		{"compare-jit.txt", []string{"explain", "--compare", fixtures + "jit-overhead.bad.txt", fixtures + "jit-overhead.good.json"}, ExitOK},
	} {
		t.Run(c.golden, func(t *testing.T) {
			code, out, errOut := run(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, errOut)
			}
			golden(t, c.golden, out)
		})
	}
}

func TestExplainJSON(t *testing.T) {
	code, out, _ := run(t, "explain", "--format", "json", fixtures+"sort-spill.bad.txt")
	if code != ExitFindings {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Plan struct {
			Nodes []struct {
				Label string  `json:"label"`
				Self  float64 `json:"exclusive_ms"`
				Hot   bool    `json:"hot"`
				Spill string  `json:"spill"`
			} `json:"nodes"`
		} `json:"plan"`
		Findings []struct {
			Rule string `json:"rule"`
			Fix  struct {
				SQL string `json:"sql"`
			} `json:"fix"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Plan.Nodes) != 2 || !doc.Plan.Nodes[0].Hot || !strings.Contains(doc.Plan.Nodes[0].Spill, "on disk") {
		t.Errorf("nodes %+v", doc.Plan.Nodes)
	}
	if len(doc.Findings) == 0 || doc.Findings[0].Rule != "sort-spill" || !strings.Contains(doc.Findings[0].Fix.SQL, "work_mem") {
		t.Errorf("findings %+v", doc.Findings)
	}
}

// TestExplainBadInput: one line on stderr, exit 2, nothing on stdout.
func TestExplainBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, _ := os.ReadFile(fixtures + "hash-batches.bad.txt")
	goodJSON, _ := os.ReadFile(fixtures + "hash-batches.bad.json")
	lines := strings.Split(string(good), "\n")
	lines[9] = "  " + lines[9]
	for name, c := range map[string]struct {
		args []string
		says string
	}{
		"empty file":         {[]string{"explain", write("empty", "")}, "empty"},
		"truncated json":     {[]string{"explain", write("t.json", string(goodJSON[:len(goodJSON)/3]))}, "truncated"},
		"broken indentation": {[]string{"explain", write("b.txt", strings.Join(lines, "\n"))}, "indentation is broken"},
		"not a plan":         {[]string{"explain", write("n.txt", "2024-01-01 LOG: checkpoint starting\n")}, "not a plan node"},
		"missing file":       {[]string{"explain", filepath.Join(dir, "nope.json")}, "cannot read the plan"},
		"no input":           {[]string{"explain"}, "give a plan file"},
		"two plans":          {[]string{"explain", fixtures + "wal.txt", fixtures + "wal.json"}, "--compare"},
		"analyze no query":   {[]string{"explain", "--analyze", fixtures + "wal.txt"}, "--analyze goes with --query"},
		"query no dsn":       {[]string{"explain", "--query", "SELECT 1"}, "--query needs --dsn"},
		"compare one":        {[]string{"explain", "--compare", fixtures + "wal.txt"}, "needs two plans"},
		"compare bad":        {[]string{"explain", "--compare", fixtures + "wal.txt", write("e2", " ")}, "empty"},
		"refused":            {[]string{"explain", "--dsn", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", "--query", "SELECT 1"}, "127.0.0.1"},
		"unknown rule":       {[]string{"explain", "--rules", "nope", fixtures + "wal.txt"}, "unknown rule"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, c.args...)
			if code != ExitInput || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, c.says) {
				t.Errorf("exit %d, stdout %q, stderr %q (want exit 2, one line with %q)", code, out, errOut, c.says)
			}
		})
	}
}

func TestExplainWithoutAnalyze(t *testing.T) {
	code, out, errOut := run(t, "explain", fixtures+"costs-only.json")
	if code == ExitInput || !strings.Contains(errOut, "need EXPLAIN (ANALYZE, BUFFERS)") || !strings.Contains(out, "SKIPPED") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}

// TestExplainDSN runs EXPLAIN through the envelope on a database the test
// creates: the cast is confirmed from the catalogs and by a timed re-plan,
// varchar = text is not flagged, and ANALYZE is refused for DML.
func TestExplainDSN(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	conn := admin(t, "postgres")
	conn.Exec(ctx, "DROP DATABASE IF EXISTS explain_casts")
	if _, err := conn.Exec(ctx, "CREATE DATABASE explain_casts"); err != nil {
		t.Fatal(err)
	}
	db := admin(t, "explain_casts")
	for _, q := range []string{
		`CREATE SCHEMA shop`,
		`CREATE TABLE shop.items (item_no int NOT NULL, code varchar(16) NOT NULL, label char(10) NOT NULL)`,
		`INSERT INTO shop.items SELECT g, 'c' || g, 'l' || (g % 5000) FROM generate_series(1, 200000) g`,
		`CREATE INDEX ON shop.items (item_no)`, `CREATE INDEX ON shop.items (code)`, `CREATE INDEX ON shop.items (label)`,
		`VACUUM ANALYZE shop.items`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dsn := cluster.DSN("explain_casts")
	type doc struct {
		Findings []struct {
			Rule         string `json:"rule"`
			Verification struct {
				Status string                   `json:"status"`
				Method string                   `json:"method"`
				Before *struct{ Value float64 } `json:"before"`
				After  *struct{ Value float64 } `json:"after"`
			} `json:"verification"`
		} `json:"findings"`
	}
	castFindings := func(query string, analyze bool) doc {
		args := []string{"explain", "--dsn", dsn, "--query", query, "--format", "json"}
		if analyze {
			args = append(args, "--analyze")
		}
		code, out, errOut := run(t, args...)
		if code == ExitInput || code == ExitInternal {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var d doc
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		var only doc
		for _, f := range d.Findings {
			if f.Rule == "implicit-cast" {
				only.Findings = append(only.Findings, f)
			}
		}
		return only
	}
	// The evidence that does not depend on the machine's speed: the plan
	// without the cast uses the column's index (the method says which),
	// and the run with it is the faster one.
	d := castFindings(`SELECT count(*) FROM shop.items WHERE item_no = 4242.0`, true)
	if len(d.Findings) != 1 || d.Findings[0].Verification.Status != "confirmed" ||
		!strings.Contains(d.Findings[0].Verification.Method, "the plan without the cast uses items_item_no_idx") ||
		d.Findings[0].Verification.After.Value >= d.Findings[0].Verification.Before.Value {
		t.Errorf("int = numeric: %+v", d)
	}
	d = castFindings(`SELECT count(*) FROM shop.items WHERE label = 'l42'::text`, false)
	if len(d.Findings) != 1 || d.Findings[0].Verification.Status != "confirmed" {
		t.Errorf("char = text (plan without ANALYZE, experiment measured): %+v", d)
	}
	if d := castFindings(`SELECT count(*) FROM shop.items WHERE code = 'c42'::text`, true); len(d.Findings) != 0 {
		t.Errorf("varchar = text flagged: %+v", d)
	}
	code, _, errOut := run(t, "explain", "--dsn", dsn, "--query", "UPDATE shop.items SET code = 'x' WHERE item_no = 1", "--analyze")
	if code != ExitInput || !strings.Contains(errOut, "only a plain SELECT") {
		t.Errorf("ANALYZE of an UPDATE: exit %d %s", code, errOut)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM shop.items WHERE code = 'x'").Scan(&n); err != nil || n != 0 {
		t.Errorf("the UPDATE ran: %d rows changed (%v)", n, err)
	}
}

// TestExplainEveryVersion: the plans each major version from 13 to 18
// printed (scripts/version-fixtures.sh), in both formats, get the same
// rules; the text report of one of them is kept per version, since the
// figures differ from version to version.
func TestExplainEveryVersion(t *testing.T) {
	want := map[string][]string{
		"implicit-cast": {"[implicit-cast]"},
		"sort-spill":    {"[sort-spill]", "[large-offset]"},
		"misestimate":   {"[misestimate]"},
	}
	// Every major pgversion knows: a new row there needs its fixtures here.
	for _, m := range pgversion.Majors() {
		v := strconv.Itoa(m)
		dir := "../plan/testdata/versions/pg" + v + "/"
		for name, rules := range want {
			for _, ext := range []string{".txt", ".json"} {
				code, out, errOut := run(t, "explain", dir+name+ext)
				if code != ExitFindings {
					t.Errorf("PostgreSQL %s %s%s: exit %d, stderr %s", v, name, ext, code, errOut)
				}
				for _, r := range rules {
					if !strings.Contains(out, r) {
						t.Errorf("PostgreSQL %s %s%s: no %s in\n%s", v, name, ext, r, out)
					}
				}
				if name == "sort-spill" && ext == ".txt" {
					golden(t, "versions/pg"+v+"-sort-spill.txt", out)
				}
			}
		}
	}
}
