package baseline

import (
	"strings"
	"testing"

	"github.com/pgmedic/pgmedic/internal/model"
)

// FuzzLoad reads any bytes as a --baseline report, then compares a check
// with it: no panic, and a refusal is one line.
func FuzzLoad(f *testing.F) {
	f.Add(`{"pgmedic":"x","findings":[{"rule":"missing-index","severity":"warning","title":"t","object":{"kind":"table","name":"public.t"}}],"statements":[{"queryid":"1","fingerprint":"ab","query":"SELECT 1","calls":5,"mean_ms":2}]}`)
	f.Add(`{"results":[{"report":{"findings":[],"statements":[{"calls":-1,"mean_ms":1e308}]}}]}`)
	f.Add(`[{"findings":null}]`)
	f.Fuzz(func(t *testing.T, data string) {
		old, err := Load([]byte(data), "b.json")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal on several lines: %q", err)
			}
			return
		}
		d := Compare(old, old.Findings, old.Statements, nil, model.Info)
		if d.Counts.New != 0 || d.Counts.Resolved != 0 {
			t.Fatalf("a report against itself: %+v", d.Counts)
		}
	})
}
