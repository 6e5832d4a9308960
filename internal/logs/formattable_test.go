package logs

import "testing"

// TestFormatTable keeps the formats table the one list: each row has a
// reader and says what writes it, --format-in names every row, and a
// format needs a prefix exactly when its row finds the stderr lines it
// carries. A split format must be one whose entries start on a line of
// their own (stderr, jsonlog). A JSON format's row recognises its lines
// and either reads them or finds the stderr line each carries, and its
// own lines are recognised as its, not as a row's above it.
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
		if r.is != nil && (r.entry == nil) == (r.text == nil) {
			t.Errorf("%s: a JSON format either takes PostgreSQL's line apart (entry) or carries it (text), not both or neither", r.Format)
		}
		if r.is == nil && (r.entry != nil || r.text != nil) {
			t.Errorf("%s: entry or text without is: its lines would never be recognised", r.Format)
		}
		if r.text != nil && !needsPrefix(r.Format) {
			t.Errorf("%s: carries stderr lines, so its prefix must be detected (texts)", r.Format)
		}
	}
	for _, c := range []struct {
		line string
		want Format
	}{
		{`{"timestamp":"2026-11-25 12:00:00.000 UTC","pid":7,"error_severity":"LOG","message":"duration: 1 ms"}`, JSON},
		{`{"level":"info","msg":"record","record":{"log_time":"2026-11-25 12:00:00.000 UTC","error_severity":"LOG","message":"x"}}`, CNPG},
		{`{"textPayload":"[7]: [1-1] db=a,user=b LOG:  x","timestamp":"2026-11-25T12:00:00Z"}`, CloudSQL},
		{`{"MESSAGE":"[1-1] LOG:  x","_PID":"7","__REALTIME_TIMESTAMP":"1764072000000000"}`, Journald},
		{`{"time":"2026-11-25T12:00:00Z","properties":{"errorLevel":"LOG","message":"x","processId":7}}`, Azure},
		{`{"log":"2026-11-25 12:00:00.000 UTC [7] LOG:  x\n","stream":"stderr","time":"2026-11-25T12:00:00Z"}`, Docker},
		{`{"timestamp":1764072000000,"message":"2026-11-25 12:00:00 UTC::@:[7]:LOG:  x"}`, CloudWatch},
	} {
		if got := classifyJSON([]string{c.line}); got != c.want {
			t.Errorf("%s: read as %q, want %q", c.line, got, c.want)
		}
	}
	if _, err := Read(nil, Format("nope"), nil, nil); err == nil {
		t.Error("Read took a format that is not in the table")
	}
}
