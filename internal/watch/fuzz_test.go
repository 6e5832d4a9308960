package watch

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParseFleet feeds any text as a --targets file: no panic, and a
// refusal is one line that never shows a password.
func FuzzParseFleet(f *testing.F) {
	f.Add("targets:\n  - name: a\n    dsn: postgres://u:secret@h/d\n    labels: {env: prod}\n")
	f.Add("targets: [{name: a, dsn: \"host=x password=secret\", server_cores: 4}]")
	f.Add("targets:\n  - name: a\n    dsn: 'postgres://u:secret@h:x/d'\n")
	f.Add("{")
	f.Fuzz(func(t *testing.T, yaml string) {
		fl, err := ParseFleet([]byte(yaml), "f.yaml")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal on several lines: %q", err)
			}
			if strings.Contains(err.Error(), "u:secret") {
				t.Fatalf("a refusal shows a password: %q", err)
			}
			return
		}
		for _, tg := range fl.Targets {
			if !targetName().MatchString(tg.Name) || tg.DSN == "" {
				t.Fatalf("accepted %+v", tg)
			}
		}
	})
}

// FuzzRing reads any bytes as a segment of the ring: no panic, and a
// line that does not read is counted, never returned.
func FuzzRing(f *testing.F) {
	f.Add(`{"kind":"tick","at":"2026-11-25T12:00:01Z","sample":{"at":"2026-11-25T12:00:01Z","backends":[{"pid":1,"database":"a","state":"active"}]}}` + "\n" + `{"kind":"tick","at":"2026-11-25T12:00:0`)
	f.Add(`{"kind":"statements","at":"2026-11-25T12:00:30Z","statements":[{"database":"a","QueryID":1,"Calls":3}]}`)
	f.Add("\n\n{}\n")
	f.Fuzz(func(t *testing.T, data string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segmentName(t0)), []byte(data), 0o600)
		recs, skipped, err := (&Ring{Dir: dir}).Read(t0, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Count(data, "\n") + 1; len(recs)+skipped > lines {
			t.Fatalf("%d records and %d skipped from %d lines", len(recs), skipped, lines)
		}
		for _, r := range recs {
			if r.At.Before(t0) || r.At.After(t0.Add(time.Minute)) {
				t.Fatalf("a record outside the window: %v", r.At)
			}
		}
	})
}

// FuzzReadRequest reads any bytes as a /metrics request: no panic, and a
// request it accepts has a method, and a path that starts with a slash
// and has lost its query string.
func FuzzReadRequest(f *testing.F) {
	f.Add("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
	f.Add("GET http://h:9187/metrics?x=1 HTTP/1.0\r\n\r\n")
	f.Add("HEAD /metrics HTTP/1.1\n\n")
	f.Add("GET /metrics HTTP/1.1\r\nX: a")
	f.Add("hello\r\n\r\n")
	f.Fuzz(func(t *testing.T, req string) {
		method, path, ok := readRequest(bufio.NewReaderSize(strings.NewReader(req), 4096))
		if !ok {
			return
		}
		if method == "" || !strings.HasPrefix(path, "/") || strings.Contains(path, "?") {
			t.Fatalf("accepted %q as method %q, path %q", req, method, path)
		}
	})
}
