package profile

import "testing"

func TestParseProcStat(t *testing.T) {
	for line, want := range map[string]float64{
		"4242 (postgres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 1 0 100 2000000 3000 18446744073709551615": 3000,
		"4242 (post gres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0":                                               -1,
		"4242 (bash) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0":                                                    -1,
		"4242 (postgres) S 1 2": -1,
		"":                      -1,
	} {
		got, ok := parseProcStat([]byte(line))
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}

// FuzzParseProcStat: any /proc/<pid>/stat line reads without a panic, and
// a CPU time it returns is never negative.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (postgres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 1 0 100 2000000 3000"))
	f.Add([]byte("1 (a) b) R 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ms, ok := parseProcStat(b); ok && (ms < 0 || ms != ms) {
			t.Fatalf("%q: %v", b, ms)
		}
	})
}
