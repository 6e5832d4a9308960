package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// TestLogs: the lab's log in its three formats on one command line; the
// executed plans auto_explain logged give the JIT and implicit-cast
// findings pg_stat_statements could not; a log with nothing to read exits
// 2 with the reason.
func TestLogs(t *testing.T) {
	dir := "../logs/testdata/lab/"
	code, out, errOut := run(t, "logs", "--format", "json", dir+"stderr.log", dir+"csvlog.csv", dir+"jsonlog.json.gz-missing-on-purpose", dir+"jsonlog.json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Files []struct {
			Name    string `json:"name"`
			Entries int64  `json:"entries"`
			Error   string `json:"error"`
		} `json:"files"`
		Statements []struct {
			Query string `json:"query"`
			Count int64  `json:"count"`
		} `json:"statements"`
		Findings []model.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 4 || !strings.Contains(rep.Files[2].Error+rep.Files[0].Error+rep.Files[1].Error+rep.Files[3].Error, "no such file") {
		t.Errorf("files: %+v", rep.Files)
	}
	rules := map[string]bool{}
	for _, f := range rep.Findings {
		rules[f.Rule] = true
	}
	if !rules["jit-overhead"] || !rules["implicit-cast"] || !rules["stale-statistics"] {
		t.Errorf("findings from the executed plans: %v", rules)
	}
	// The workload log is the maintenance log's quiet counterpart: one CHECKPOINT
	// command and autovacuum that removed what it found.
	if rules["checkpoint-pressure"] || rules["table-bloat"] {
		t.Errorf("maintenance findings on the workload log: %v", rules)
	}
	// Values stay out of the report unless asked for, in every section.
	for _, secret := range []string{"owner 1%", "'new'", "by_customer(42)"} {
		if strings.Contains(out, secret) {
			t.Errorf("the report shows the literal %q without --show-literals", secret)
		}
	}
	_, lit, _ := run(t, "logs", "--format", "json", "--show-literals", dir+"stderr.log")
	if !strings.Contains(lit, `"example": "SELECT count(*) FROM accounts WHERE owner LIKE 'owner 1%';"`) {
		t.Errorf("--show-literals: no example with its values")
	}
	// The checkpointer and autovacuum: their own findings.
	code, out, _ = run(t, "logs", "--format", "json", dir+"maintenance.log")
	var maint struct {
		Findings []model.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &maint); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	got := map[string]bool{}
	for _, f := range maint.Findings {
		got[f.Rule+" "+f.Object.Name] = true
	}
	if !got["checkpoint-pressure checkpointer"] || !got["table-bloat postgres.public.jobs"] {
		t.Errorf("maintenance findings: %v", got)
	}
	for _, s := range rep.Statements {
		if s.Query == "SELECT $1" && s.Count != 75 { // 25 in each format
			t.Errorf("SELECT $1 counted %d times over three files", s.Count)
		}
	}
	code, out, _ = run(t, "logs", dir+"stderr.log")
	if code != 0 || !strings.Contains(out, "== STATEMENTS") || !strings.Contains(out, "== FINDINGS") {
		t.Errorf("text: exit %d\n%s", code, out)
	}
	empty := filepath.Join(t.TempDir(), "empty.log")
	os.WriteFile(empty, nil, 0o644)
	code, _, errOut = run(t, "logs", empty)
	if code != 2 || !strings.Contains(errOut, "nothing could be parsed") || !strings.Contains(errOut, "empty") {
		t.Errorf("an empty log: exit %d, %s", code, errOut)
	}
}
