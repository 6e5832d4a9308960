package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// shared are the flags more than one command takes, each declared once
// in flags.go with one meaning.
var shared = []string{"format", "out", "min-severity", "rules", "pgbouncer", "server-cores", "statement-timeout", "prefix", "format-in", "twin", "twin-dsn", "twin-max-size"}

// TestOneShape holds every command to one shape: its shared flags come
// from flags.go (declared by hand elsewhere, they drift in name, help and
// meaning), and its report goes through the one format switch,
// report.Render, called by write.
func TestOneShape(t *testing.T) {
	names := strings.Join(shared, "|")
	byHand := regexp.MustCompile(`Flags\(\)\.\w+(Var|VarP)?\([^,]*,\s*"(` + names + `)"`)
	byHandP := regexp.MustCompile(`\b(fl|flags|f)\.\w+Var\([^,]*,\s*"(` + names + `)"`)
	formatSwitch := regexp.MustCompile(`case "(json|html|markdown)"|report\.(HTML|Markdown)\(|\.(Markdown|HTML)\(w`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "flags.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := byHand.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d declares --%s by hand: use its add function in flags.go", f, i+1, m[2])
			}
			if m := byHandP.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d declares --%s by hand: use its add function in flags.go", f, i+1, m[2])
			}
			if formatSwitch.MatchString(line) {
				t.Errorf("%s:%d renders a format itself: hand the report to write (report.Render)", f, i+1)
			}
		}
	}

	// The same from the built commands: each shared flag a command has
	// carries the help its add function gives, so it means one thing.
	want := map[string]string{}
	ref := &cobra.Command{Use: "ref"}
	var o outputFlags
	var l logInput
	var s string
	var n int
	var b bool
	addReport(ref, &o, "warning")
	addPgBouncer(ref, &s)
	addServerCores(ref, &n)
	addStatementTimeout(ref, new(time.Duration), 0)
	addLogInput(ref, &l)
	addTwin(ref, &b)
	addTwinCopy(ref, &s, &n)
	ref.Flags().VisitAll(func(f *pflag.Flag) { want[f.Name] = f.Usage })
	for _, name := range shared {
		if want[name] == "" {
			t.Fatalf("flags.go declares no --%s", name)
		}
	}
	var out, errb bytes.Buffer
	root := newRoot(nil, nil, &out, &errb)
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if u, ok := want[f.Name]; ok {
				seen++
				if f.Usage != u {
					t.Errorf("%s --%s: help %q differs from flags.go's %q: declared by hand", c.CommandPath(), f.Name, f.Usage, u)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if seen < 20 {
		t.Fatalf("saw %d shared flags across the commands: the walk missed them", seen)
	}
}
