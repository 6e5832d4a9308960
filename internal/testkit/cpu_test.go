package testkit

import "testing"

func TestCollapse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\nb\n", "a\nb\n"},
		{"a\na\na\nb\n", "a\n... the 1 lines above 3 times in all\nb\n"},
		{"x\na\nb\na\nb\ny\n", "x\na\nb\n... the 2 lines above 2 times in all\ny\n"},
		{"a\nb\na\nc\n", "a\nb\na\nc\n"},
	} {
		if got := Collapse(c.in); got != c.want {
			t.Errorf("Collapse(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
