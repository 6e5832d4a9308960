package verify

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKindsTable keeps the experiment kinds one table: every model.Exp*
// id has its row and every row an id, each row runs (or is one of the two
// shared JIT measurements), and each row that names a transcript has it
// under testdata/transcripts, where a kind= it names is a row.
func TestKindsTable(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "model", "model.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Exp") || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			ids[v] = true
		}
		return true
	})
	if len(ids) < 10 {
		t.Fatalf("read %d experiment ids from model.go: the parse missed them", len(ids))
	}
	rows := map[string]bool{}
	for _, k := range Kinds {
		if !ids[k.ID] {
			t.Errorf("row %q is no model.Exp* id", k.ID)
		}
		if rows[k.ID] {
			t.Errorf("kind %q has two rows", k.ID)
		}
		rows[k.ID] = true
		if k.run == nil && k.ID != "jit-toggle" && k.ID != "aggregate" {
			t.Errorf("kind %q has no function", k.ID)
		}
		if k.Transcript == "" {
			t.Errorf("kind %q has no transcript: every kind replays without a server", k.ID)
		} else if _, err := os.Stat(transcriptPath(k)); err != nil {
			t.Errorf("kind %q: its transcript: %v", k.ID, err)
		}
	}
	for id := range ids {
		if !rows[id] {
			t.Errorf("model.Exp* id %q has no row in verify.Kinds", id)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "transcripts", "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, field := range strings.Fields(line) {
				if kinds, ok := strings.CutPrefix(field, "kind="); ok && strings.HasPrefix(line, "verify ") {
					for _, k := range strings.Split(strings.Trim(kinds, "()"), ",") {
						if !rows[k] {
							t.Errorf("%s: kind=%s is no row of verify.Kinds", p, k)
						}
					}
				}
			}
		}
	}
}

// transcriptPath is where a kind's transcript is: under testdata, or
// (a path starting with ..) another package's.
func transcriptPath(k Kind) string {
	if strings.HasPrefix(k.Transcript, "../") {
		return k.Transcript
	}
	return filepath.Join("testdata", "transcripts", k.Transcript)
}
