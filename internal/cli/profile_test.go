package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/pgmedic/pgmedic/internal/testkit"
)

// TestProfileCommand: pgmedic profile --pid on a process that is not
// PostgreSQL (the allocator demo), every export written and readable, the
// HTML report with its flame graph opening offline; and without perf, one
// line that says what to install.
func TestProfileCommand(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil {
		testkit.Missing(t, "perf (linux-perf)", err)
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		testkit.Missing(t, "gcc", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "churn")
	if out, err := exec.Command(cc, "-O2", "-pthread", "-fno-omit-frame-pointer", "-o", bin, "../profile/testdata/churn/churn.c").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command(bin, "0", "4") // until killed: every profile below finds it running
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	files := map[string]string{}
	for _, f := range []string{"svg", "folded", "speedscope", "pprof"} {
		files[f] = filepath.Join(dir, "out."+f)
	}
	page := filepath.Join(dir, "profile.html")
	code, out, errOut := run(t, "profile", "--pid", pid, "--duration", "1500ms", "--format", "json",
		"--svg", files["svg"], "--folded", files["folded"], "--speedscope", files["speedscope"], "--pprof", files["pprof"])
	if code != 1 {
		t.Fatalf("exit %d (want 1: the allocator finding): %s %s", code, out, errOut)
	}
	var rep struct {
		Samples  int64 `json:"samples"`
		Findings []struct {
			Rule  string `json:"rule"`
			Title string `json:"title"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Samples < 100 || len(rep.Findings) == 0 || !strings.Contains(rep.Findings[0].Title, "glibc malloc") {
		t.Errorf("report: %d samples, %+v", rep.Samples, rep.Findings)
	}
	for name, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("--%s: %v", name, err)
		}
	}
	code, _, errOut = run(t, "profile", "--pid", pid, "--duration", "1500ms", "--format", "html", "--out", page)
	if code != 1 {
		t.Fatalf("html: exit %d %s", code, errOut)
	}
	b := testkit.OpenOffline(t, page)
	var frames, visible int
	if err := chromedp.Run(b.Ctx,
		chromedp.Evaluate(`document.querySelectorAll('svg.flame g.f').length`, &frames),
		chromedp.Click(`svg.flame g.f[data-d="2"]`, chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('svg.flame g.f')).filter(g => g.style.display !== 'none').length`, &visible),
	); err != nil {
		t.Fatal(err)
	}
	if frames < 5 || visible == 0 || visible >= frames {
		t.Errorf("flame graph: %d frames, %d visible after a zoom", frames, visible)
	}
	b.Screenshot(t, "profile-churn.png")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page complained: %v", errs)
	}

	// Without perf on PATH.
	t.Setenv("PATH", dir)
	code, _, errOut = run(t, "profile", "--pid", pid, "--duration", "1s")
	if code != 2 || !strings.Contains(errOut, "apt-get install linux-perf") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("without perf: exit %d, %q", code, errOut)
	}
}

// TestCheckWithoutPerf: check --profile where perf is missing says so in
// skipped and goes on with its other findings.
func TestCheckWithoutPerf(t *testing.T) {
	needCluster(t)
	t.Setenv("PATH", t.TempDir())
	code, out, errOut := run(t, "check", cluster.DSN("postgres"), "--profile", "1s", "--sample", "0", "--no-verify", "--format", "json")
	if code == 2 || code == 3 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Skipped []struct {
			Rule   string `json:"rule"`
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range rep.Skipped {
		if s.Rule == "cpu-hotspot" && strings.Contains(s.Reason, "apt-get install linux-perf") {
			found = true
		}
	}
	if !found {
		t.Errorf("no skip for the missing perf: %+v", rep.Skipped)
	}
}
