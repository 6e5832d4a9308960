package rules

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

func TestCollationPrefix(t *testing.T) {
	const q = "SELECT id, name FROM products WHERE name LIKE $1 ORDER BY name LIMIT $2"
	icu := model.Column{Schema: "public", Table: "products", Name: "name", Type: "text", Collation: "en-x-icu"}
	cLike := icu
	cLike.Collation, cLike.CLike = "C", true
	varchar := icu
	varchar.Type = "character varying(80)"
	plain := model.Index{Schema: "public", Table: "products", Name: "products_name", Method: "btree", Valid: true, Columns: []string{"name"}, PrefixKeys: []bool{false}}
	pattern := plain
	pattern.Name, pattern.PrefixKeys = "products_name_p", []bool{true}
	for _, c := range []struct {
		name    string
		query   string
		col     model.Column
		indexes []model.Index
		blocks  int64
		want    model.Severity
		opclass string
	}{
		{name: "an ICU column with its collation's index", query: q, col: icu, indexes: []model.Index{plain}, blocks: 2000, want: model.Warning, opclass: "text_pattern_ops"},
		{name: "no index at all", query: q, col: icu, blocks: 2000, want: model.Warning, opclass: "text_pattern_ops"},
		{name: "varchar gets its own operator class", query: q, col: varchar, blocks: 2000, want: model.Warning, opclass: "varchar_pattern_ops"},
		{name: "a pattern index serves it", query: q, col: icu, indexes: []model.Index{plain, pattern}, blocks: 2000, want: -1},
		{name: "a C column's index serves it", query: q, col: cLike, indexes: []model.Index{plain}, blocks: 2000, want: -1},
		{name: "a cheap search is not a scan", query: q, col: icu, indexes: []model.Index{plain}, blocks: 20, want: -1},
		{name: "a suffix search no index serves", query: "SELECT id FROM products WHERE name LIKE '%oak'", col: icu, blocks: 2000, want: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := sqlparse.Parse(c.query)
			if err != nil {
				t.Fatal(err)
			}
			st := model.Statement{QueryID: 3, Query: c.query, Parsed: parsed, Role: "app", Calls: 10, TotalExecMS: 130, SharedBlksHit: 10 * c.blocks, Rows: 200}
			s := &model.Snapshot{Database: "shop", Statements: []model.Statement{st},
				Tables: []model.Table{{Schema: "public", Name: "products", Live: 200000}}, Columns: []model.Column{c.col}, Indexes: c.indexes}
			fs, _ := collationPrefix(s)
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
			if f.Severity != c.want || f.Experiment == nil || f.Experiment.Kind != model.ExpIndex || f.Experiment.Proposal == nil ||
				f.Experiment.Proposal.Keys[0].Opclass != c.opclass || !strings.Contains(f.Fix.SQL, "(name "+c.opclass+")") {
				t.Errorf("%v %+v %s", f.Severity, f.Experiment, f.Fix.SQL)
			}
		})
	}
}

func TestDuplicateIndexSeesOperatorClasses(t *testing.T) {
	ix := model.Index{Schema: "public", Table: "products", Name: "products_name", Method: "btree", Valid: true, Columns: []string{"name"}, KeyClasses: []string{"text_ops en-x-icu"}}
	pattern := ix
	pattern.Name, pattern.KeyClasses = "products_name_p", []string{"text_pattern_ops en-x-icu"}
	twin := ix
	twin.Name = "products_name_again"
	s := &model.Snapshot{Tables: []model.Table{{Schema: "public", Name: "products"}}, Indexes: []model.Index{ix, pattern}}
	if fs, _ := duplicateIndex(s); len(fs) > 0 {
		t.Errorf("a pattern index covers its collation's index: %s", fs[0].Title)
	}
	s = &model.Snapshot{Tables: s.Tables, Indexes: []model.Index{ix, pattern, twin}}
	if fs, _ := duplicateIndex(s); len(fs) != 1 {
		t.Errorf("the same operator class twice is a duplicate: %d findings", len(fs))
	}
}
