package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestPartitionPruning(t *testing.T) {
	parent := model.Table{Schema: "public", Name: "readings", Partitioned: true, PartitionKey: []string{"taken_at"}, Partitions: 24}
	for _, c := range []struct {
		name    string
		query   string
		table   model.Table
		meanMS  float64
		want    model.Severity
		fixWant string // "" when no rewrite is proposed
	}{
		{name: "a cast of the key", query: "SELECT count(*) FROM readings WHERE taken_at::date = $1", table: parent, meanMS: 30, want: model.Warning, fixWant: "taken_at >= $1::date"},
		{name: "date_trunc of the key, aliased", query: "SELECT avg(r.kwh) FROM readings r WHERE date_trunc('day', r.taken_at) = $1", table: parent, meanMS: 30, want: model.Warning, fixWant: "r.taken_at >= $1"},
		{name: "a function with no rewrite", query: "SELECT * FROM readings WHERE to_char(taken_at, 'YYYY') = $1", table: parent, meanMS: 30, want: model.Warning},
		{name: "a range on the key prunes", query: "SELECT count(*) FROM readings WHERE taken_at >= $1 AND taken_at < $2", table: parent, meanMS: 30, want: -1},
		{name: "a table that is not partitioned", query: "SELECT count(*) FROM readings WHERE taken_at::date = $1", table: model.Table{Schema: "public", Name: "readings"}, meanMS: 30, want: -1},
		{name: "two partitions are not worth it", query: "SELECT count(*) FROM readings WHERE taken_at::date = $1", table: model.Table{Schema: "public", Name: "readings", Partitioned: true, PartitionKey: []string{"taken_at"}, Partitions: 2}, meanMS: 30, want: -1},
		{name: "an expression key is not read", query: "SELECT count(*) FROM readings WHERE taken_at::date = $1", table: model.Table{Schema: "public", Name: "readings", Partitioned: true, Partitions: 24}, meanMS: 30, want: -1},
		{name: "a small share is info", query: "SELECT count(*) FROM readings WHERE taken_at::date = $1", table: parent, meanMS: 0.5, want: model.Info, fixWant: "taken_at >= $1::date"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := sqlparse.Parse(c.query)
			if err != nil {
				t.Fatal(err)
			}
			st := model.Statement{QueryID: 7, Query: c.query, Parsed: parsed, Role: "app", Calls: 10, TotalExecMS: 10 * c.meanMS}
			other := model.Statement{QueryID: 8, Query: "SELECT 1", Calls: 10000, TotalExecMS: 1000}
			s := &model.Snapshot{Database: "meters", Statements: []model.Statement{st, other}, Tables: []model.Table{c.table}}
			fs, _ := partitionPruning(s)
			if c.want < 0 {
				if len(fs) > 0 {
					t.Fatalf("fired: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("%d findings", len(fs))
			}
			f := fs[0]
			if f.Severity != c.want || !strings.Contains(f.Title, "24 partitions of readings") {
				t.Errorf("%v %s", f.Severity, f.Title)
			}
			if c.fixWant == "" {
				if f.Experiment != nil || f.Fix.SQL != "" {
					t.Errorf("a rewrite for an expression pgmedic cannot rewrite: %s", f.Fix.SQL)
				}
				return
			}
			if f.Experiment == nil || f.Experiment.Kind != model.ExpPartitionPruning || !strings.Contains(f.Experiment.Rewrite, c.fixWant) || f.Fix.SQL != f.Experiment.Rewrite {
				t.Errorf("experiment %+v, fix %q", f.Experiment, f.Fix.SQL)
			}
		})
	}
}
