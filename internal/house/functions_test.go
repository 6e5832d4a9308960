package house

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunctionLengths keeps functions short enough to read in one screen:
// at most 1% of the module's functions (tests and generated files aside)
// run over 80 lines, and none of them in internal/cli, whose files only
// read flags and hand them on.
func TestFunctionLengths(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var total int
	var long []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			total++
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines <= 80 {
				continue
			}
			long = append(long, rel+": "+fn.Name.Name)
			if strings.HasPrefix(filepath.ToSlash(rel), "internal/cli/") {
				t.Errorf("%s: %s is %d lines: a command's file reads its flags and hands them to a pipeline function", rel, fn.Name.Name, lines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total < 1000 {
		t.Fatalf("counted %d functions from %s: the walk did not reach the module", total, root)
	}
	if float64(len(long)) > 0.01*float64(total) {
		t.Errorf("%d of %d functions are over 80 lines (%.2f%%, the bound is 1%%):\n%s", len(long), total, 100*float64(len(long))/float64(total), strings.Join(long, "\n"))
	}
	t.Logf("%d of %d functions over 80 lines (%.2f%%)", len(long), total, 100*float64(len(long))/float64(total))
}
