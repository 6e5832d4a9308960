// Package docs holds pgmedic's documentation; its test keeps the links of
// README.md and of every page here pointing at something that exists.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link is a Markdown inline link or image: [text](target) or ![alt](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchorTag is an explicit anchor a page sets with <a id="...">.
var anchorTag = regexp.MustCompile(`<a id="([^"]+)">`)

// TestRelativeLinksResolve: every relative link in README.md, CONTRIBUTING.md and docs/
// names a file of the repository, and a #fragment names a heading (or an
// explicit anchor) of the page it points into. Links to other sites are
// not followed: the tests run offline.
func TestRelativeLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("*/*.md")
	pages = append(append(pages, more...), "../README.md", "../CONTRIBUTING.md")
	if len(pages) < 20 {
		t.Fatalf("%d pages found", len(pages))
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			checked++
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[frag] {
				t.Errorf("%s links to %s: %s has no heading #%s", page, target, path, frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: the pattern reads nothing", checked)
	}
}

// withoutCode drops fenced code blocks and inline code, where brackets
// and parentheses are SQL or shell, not links.
func withoutCode(s string) string {
	var out []string
	fenced := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "``"))
		}
	}
	return strings.Join(out, "\n")
}

// anchors are the fragments a page answers to: its headings as GitHub
// turns them into ids (lower case, punctuation dropped, spaces as
// hyphens, a repeated one numbered) and its explicit anchors.
func anchors(t *testing.T, path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		for _, m := range anchorTag.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		id := slug(strings.TrimLeft(l, "# "))
		if n := seen[id]; n > 0 {
			out[id+"-"+itoa(n)] = true
		} else {
			out[id] = true
		}
		seen[id]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestSlug holds the heading ids to GitHub's for the headings the pages use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Proof on a twin: `check --twin`": "proof-on-a-twin-check---twin",
		"Reading a finding":               "reading-a-finding",
		"Every PostgreSQL from 13 to 18":  "every-postgresql-from-13-to-18",
		"What it finds":                   "what-it-finds",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestEveryFuzzerIsListed: docs/fuzzing.md gives the command that runs
// each fuzz target of the repository, in its package, and a row of the
// table for it: a new parser's fuzzer is documented when it is added.
func TestEveryFuzzerIsListed(t *testing.T) {
	page, err := os.ReadFile("fuzzing.md")
	if err != nil {
		t.Fatal(err)
	}
	fuzzer := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	n := 0
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))
		for _, m := range fuzzer.FindAllStringSubmatch(string(b), -1) {
			n++
			cmd := regexp.MustCompile(`go test ` + regexp.QuoteMeta(pkg) + ` +-run '\^\$' -fuzz '\^` + m[1] + `\$'`)
			if !cmd.Match(page) {
				t.Errorf("docs/fuzzing.md gives no command for %s (%s)", m[1], pkg)
			}
			if !regexp.MustCompile("(?m)^\\|.*`" + m[1] + "`").Match(page) {
				t.Errorf("docs/fuzzing.md has no row for %s", m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Errorf("found %d fuzz targets: the walk missed them", n)
	}
}
