package printable

import (
	"testing"
	"unicode/utf8"
)

// TestCutsNeverSplitACharacter: every clipper cuts on a character
// boundary and keeps what fits untouched.
func TestCutsNeverSplitACharacter(t *testing.T) {
	s := "SELECT 'Zürich', 'Łódź', '東京' FROM cities"
	for n := 0; n <= len(s)+1; n++ {
		for _, out := range []string{Clip(s, n), Shorten(s, n), Trim(s, n, "...")} {
			if !utf8.ValidString(out) {
				t.Fatalf("cut at %d: %q is not valid UTF-8", n, out)
			}
		}
	}
	if Trim("short", 10, "...") != "short" || Shorten("a  b\nc", 10) != "a b c" {
		t.Error("a text that fits was changed")
	}
	if got := Shorten("SELECT 1 FROM t", 8); got != "SELECT 1 ..." {
		t.Errorf("Shorten: %q", got)
	}
	if got := Clip("SELECT 1 FROM t", 8); got != "SELECT 1…" {
		t.Errorf("Clip: %q", got)
	}
}

func TestNumbers(t *testing.T) {
	for _, c := range [][2]string{
		{Rows(950), "950"}, {Rows(40000), "40k"}, {Rows(1.2e6), "1.2M"},
		{Count(1234567), "1,234,567"}, {Count(-1000), "-1,000"},
		{MS(2310), "2.31 s"}, {MS(43), "43 ms"}, {MS(0.5), "0.5 ms"}, {MS(0.052), "0.052 ms"},
		{PlanMS(43), "43.00 ms"}, {PlanMS(430), "430 ms"}, {PlanMS(2310), "2.31 s"},
		{Ratio(2.5), "2.5x"}, {Ratio(40), "40x"}, {KB(512), "512 kB"}, {KB(1536), "1.5 MB"},
	} {
		if c[0] != c[1] {
			t.Errorf("%q, want %q", c[0], c[1])
		}
	}
}
