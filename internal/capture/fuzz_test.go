package capture

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/pgmedic/pgmedic/internal/logs"
)

// FuzzCapture reads any bytes as a log: no panic, and a workload that is
// returned holds what it counts, with no statement before the capture
// began or a session ending before it starts.
func FuzzCapture(f *testing.F) {
	if b, err := os.ReadFile("testdata/mixed.log"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("2026-11-25 10:00:00.000 UTC [1] a@d LOG:  execute S_1: SELECT $1\n2026-11-25 10:00:00.000 UTC [1] a@d DETAIL:  parameters: $1 = 'x'\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		src := logs.Source{Name: "fuzz", Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
		w, err := Read(context.Background(), []logs.Source{src}, Options{})
		if err != nil {
			return
		}
		n := 0
		for _, s := range w.Sessions {
			if s.End < s.Start {
				t.Fatalf("session %s ends at %v before it starts at %v", s.ID, s.End, s.Start)
			}
			for _, st := range s.Statements {
				if st.At < 0 || st.At < s.Start {
					t.Fatalf("statement at %v, session start %v", st.At, s.Start)
				}
				n++
			}
		}
		if n != w.Statements {
			t.Fatalf("%d statements held, %d counted", n, w.Statements)
		}
	})
}

func FuzzParameters(f *testing.F) {
	f.Add("parameters: $1 = 'a''b', $2 = NULL")
	f.Fuzz(func(t *testing.T, s string) {
		Parameters(s)
	})
}
