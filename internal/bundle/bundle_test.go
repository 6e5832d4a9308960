package bundle

import (
	"strings"
	"testing"
	"time"
)

const window = `{"kind":"start","at":"2026-11-27T10:00:00Z","server":{"version":"15.20"}}
{"kind":"tick","at":"2026-11-27T10:00:01Z","sample":{"at":"2026-11-27T10:00:01Z","backends":[{"pid":7,"database":"shop","state":"idle in transaction"},{"pid":8,"database":"shop","state":"active","wait_type":"Lock","wait":"transactionid","blocked_by":[7]}]},"pools":{"pools":[{"database":"shop","user":"app","cl_active":2,"cl_waiting":3,"sv_active":2,"sv_idle":0,"sv_used":0,"maxwait_ms":120}]}}
{"kind":"statements","at":"2026-11-27T10:00:02Z","statements":[]}
{"kind":"gap","at":"2026-11-27T10:00:02Z","until":"2026-11-27T10:00:05Z","note":"connection lost"}
{"kind":"tick","at":"2026-11-27T10:00:06Z","sample":{"at":"2026-11-27T10:00:06Z","backends":[]}}
{"kind":"tick","at":"2026-11-27T10:00:07Z","sample":{"backends":[{"pid":
`

func TestParseWindow(t *testing.T) {
	samples, pools, gaps, bad, err := ParseWindow(strings.NewReader(window))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 2 || len(samples[0].Backends) != 2 || samples[0].Backends[1].BlockedBy[0] != 7 {
		t.Errorf("samples %+v", samples)
	}
	// The pools of a record without their own time take the record's.
	if len(pools) != 1 || !pools[0].At.Equal(time.Date(2026, 11, 27, 10, 0, 1, 0, time.UTC)) || pools[0].Pools[0].ClWaiting != 3 {
		t.Errorf("pools %+v", pools)
	}
	if len(gaps) != 1 || gaps[0].Note != "connection lost" || gaps[0].To.Sub(gaps[0].From) != 3*time.Second {
		t.Errorf("gaps %+v", gaps)
	}
	// The last line was cut by a crash.
	if bad != 1 {
		t.Errorf("%d bad lines, want 1", bad)
	}
}

// FuzzParseWindow: whatever a damaged window holds, reading it ends
// without a panic, and every sample it keeps came from a tick.
func FuzzParseWindow(f *testing.F) {
	f.Add([]byte(window))
	f.Add([]byte(`{"kind":"tick","at":"x"}` + "\n" + `[1,2]` + "\n" + `null`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, pools, gaps, bad, err := ParseWindow(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		lines := strings.Count(string(b), "\n") + 1
		if len(samples)+len(gaps)+bad > lines || len(pools) > lines {
			t.Fatalf("%d samples, %d gaps, %d bad from %d lines", len(samples), len(gaps), bad, lines)
		}
	})
}
