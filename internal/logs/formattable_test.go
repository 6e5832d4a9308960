package logs

import "testing"

// TestFormatTable keeps the formats table the one list: each row has a
// reader and says what writes it, --format-in names every row, and a
// format needs a prefix exactly when its row finds the stderr lines it
// carries. A split format must be one whose entries start on a line of
// their own (stderr, jsonlog).
func TestFormatTable(t *testing.T) {
	if len(Formats) != len(formats) {
		t.Fatalf("Formats has %d names, the table %d rows", len(Formats), len(formats))
	}
	seen := map[Format]bool{}
	for i, r := range formats {
		if r.read == nil || r.Says == "" || seen[r.Format] {
			t.Errorf("row %d (%s): a reader, what writes it, and a name of its own", i, r.Format)
		}
		seen[r.Format] = true
		if f, ok := FormatNamed(string(r.Format)); !ok || f != r.Format {
			t.Errorf("--format-in %s is not read as its row", r.Format)
		}
		if needsPrefix(r.Format) != (r.texts != nil) {
			t.Errorf("%s: needsPrefix disagrees with its row", r.Format)
		}
		if r.split && r.Format != Stderr && r.Format != JSON {
			t.Errorf("%s: only stderr and jsonlog entries can be found from any offset (isStart)", r.Format)
		}
	}
	if _, err := Read(nil, Format("nope"), nil, nil); err == nil {
		t.Error("Read took a format that is not in the table")
	}
}
