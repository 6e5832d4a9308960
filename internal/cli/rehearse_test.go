package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRehearseMigrationInput: without a source the migration is read
// statement by statement and judged on its locks; bad input is one line
// and exit 2, with nothing on stdout that looks like a report.
func TestRehearseMigrationInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	risky := write("risky.sql", "ALTER TABLE orders ALTER COLUMN total TYPE numeric(14,2);\nCREATE INDEX ON orders (placed);\n")
	quiet := write("quiet.sql", "CREATE TABLE notes (id int);\nCREATE INDEX CONCURRENTLY ON orders (placed);\n")
	code, out, _ := run(t, "rehearse", "migration", risky)
	if code != 1 || !strings.Contains(out, "AccessExclusiveLock on orders") || !strings.Contains(out, "rewrites the table") || !strings.Contains(out, "Not rehearsed") && !strings.Contains(out, "not rehearsed") {
		t.Errorf("risky, read only: exit %d\n%s", code, out)
	}
	if code, out, _ := run(t, "rehearse", "migration", quiet); code != 0 || !strings.Contains(out, "reads and writes go on") {
		t.Errorf("quiet, read only: exit %d\n%s", code, out)
	}
	if code, _, _ := run(t, "rehearse", "migration", risky, "--fail-when", "none"); code != 0 {
		t.Errorf("--fail-when none: exit %d", code)
	}
	// The old spelling still works for a release, and says what replaced it.
	if code, _, errOut := run(t, "rehearse", "migration", risky, "--fail-on", "none"); code != 0 || !strings.Contains(errOut, "use --fail-when") {
		t.Errorf("--fail-on none (the old name): exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := run(t, "rehearse", "migration", risky, "--format", "json"); code != 1 || !strings.Contains(out, `"lock": "AccessExclusiveLock"`) {
		t.Errorf("json: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(dir, "missing.sql")}, "no such file"},
		{[]string{write("bad.sql", "ALTER TABLE orders ADD COLUMN;")}, "bad.sql"},
		{[]string{write("empty.sql", "-- nothing yet\n")}, "no SQL statement"},
		{[]string{risky, "--fail-when", "slow"}, "--fail-when"},
		{[]string{risky, "--log", "x.log"}, "--source"},
		{[]string{risky, "--max-wait", "0s"}, "--max-wait"},
		{[]string{risky, "--source", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2"}, "127.0.0.1"},
	} {
		code, out, errOut := run(t, append([]string{"rehearse", "migration"}, c.args...)...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q (want one line saying %q)", c.args, code, out, errOut, c.want)
		}
	}
}
