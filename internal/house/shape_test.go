package house

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// sharedFlags are the flag names more than one command declares (a
// persistent flag counts once, at the command that declares it), each with
// the help texts it carries; deprecated old spellings are left out.
func sharedFlags() map[string]map[string][]string {
	uses := map[string]map[string][]string{}
	note := func(c *cobra.Command, f *pflag.Flag) {
		if f.Deprecated != "" || f.Hidden {
			return
		}
		if uses[f.Name] == nil {
			uses[f.Name] = map[string][]string{}
		}
		uses[f.Name][f.Usage] = append(uses[f.Name][f.Usage], c.CommandPath())
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) { note(c, f) })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { note(c, f) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cli.Tree())
	for name, u := range uses {
		n := 0
		for _, cmds := range u {
			n += len(cmds)
		}
		if n < 2 {
			delete(uses, name)
		}
	}
	return uses
}

func TestOneShape(t *testing.T) {
	uses := sharedFlags()
	if len(uses) < 15 {
		t.Fatalf("found %d flag names more than one command takes: the walk missed them", len(uses))
	}
	var shared []string
	for name, u := range uses {
		shared = append(shared, regexp.QuoteMeta(name))
		// One meaning a name: every command that takes it carries the
		// help of its one add function in flags.go.
		if len(u) > 1 {
			t.Errorf("--%s has %d meanings across commands (declare it once in flags.go, or rename one): %v", name, len(u), u)
		}
	}
	names := strings.Join(shared, "|")
	byHand := regexp.MustCompile(`Flags\(\)\.\w+(Var|VarP)?\([^,]*,\s*"(` + names + `)"`)
	byHandP := regexp.MustCompile(`\b(fl|flags|f)\.\w+Var\([^,]*,\s*"(` + names + `)"`)
	formatSwitch := regexp.MustCompile(`case "(json|html|markdown)"|report\.(HTML|Markdown)\(|\.(Markdown|HTML)\(w`)
	files, err := filepath.Glob("../cli/*.go")
	if err != nil {
		t.Fatal(err)
	}
	// Declared once: a name more than one command takes has one place in
	// the source that declares it (an add function in flags.go, or the one
	// function that registers a family of commands' flags, as check's for
	// check, demo and lab run); a second place drifts in help and meaning.
	sites := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, re := range []*regexp.Regexp{byHand, byHandP} {
				if m := re.FindStringSubmatch(line); m != nil && !strings.Contains(line, `, "")`) {
					sites[m[2]] = append(sites[m[2]], fmt.Sprintf("%s:%d", f, i+1))
				}
			}
			if filepath.Base(f) != "flags.go" && formatSwitch.MatchString(line) {
				t.Errorf("%s:%d renders a format itself: hand the report to write (report.Render)", f, i+1)
			}
		}
	}
	for name, at := range sites {
		if len(at) > 1 {
			t.Errorf("--%s is declared in %d places (%s): declare it once, in flags.go", name, len(at), strings.Join(at, ", "))
		}
	}
}
