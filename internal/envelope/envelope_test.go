package envelope

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectWithin runs Connect and fails the test if it has not returned in
// limit: the redaction bug this guards against looped forever.
func connectWithin(t *testing.T, dsn string, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		s, err := Connect(context.Background(), dsn, Options{ConnectTimeout: 5 * time.Second})
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("Connect(%q) did not return within %s", dsn, limit)
		return nil
	}
}

func TestBadConnectionStrings(t *testing.T) {
	cases := []struct {
		dsn    string
		secret string
		want   string
	}{
		{"host=127.0.0.1 port=99999 password=abc", "abc", "invalid port"},
		{"password='abc", "abc", "never closed"},
		{"host=x password='abc", "abc", "never closed"},
		{"host=x password='S3cr3t-long", "S3cr3t-long", "never closed"},
		{"postgres://u:S3cr3t-P@ss_word@host/db", "S3cr3t-P", "%40"},
		{"postgres://u:S3cr3t-P@ss_word@host/db", "ss_word", "%40"},
		{"postgres://u:se%zzcret-pw@host/db", "se%zzcret-pw", "percent-encoded"},
		{"postgres://u:secret-pw@host:99999/db", "secret-pw", "invalid port"},
		{"postgresql://u@host/db?password=hunter22&port=99999", "hunter22", "invalid port"},
		{"host=x dbname", "", "without '='"},
		{"host=x port=5432 password=s3cr3t-value sslmode=bogus", "s3cr3t-value", "sslmode"},
	}
	for _, c := range cases {
		err := connectWithin(t, c.dsn, 30*time.Second)
		var ce *ConnectError
		if !errors.As(err, &ce) {
			t.Errorf("%q: want a ConnectError, got %v", c.dsn, err)
			continue
		}
		msg := err.Error()
		if c.secret != "" && strings.Contains(msg, c.secret) {
			t.Errorf("%q: the message shows the password: %s", c.dsn, msg)
		}
		if !strings.Contains(msg, c.want) {
			t.Errorf("%q: message %q does not say %q", c.dsn, msg, c.want)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%q: message spans lines: %q", c.dsn, msg)
		}
	}
}

func TestScrubShortSecretWithholdsMessage(t *testing.T) {
	f := inspectDSN("host=x password=ab")
	if _, ok := f.scrub("failed: ab was wrong"); ok {
		t.Fatal("a two-character secret inside a message must withhold the message")
	}
	if got, ok := f.scrub("invalid port"); !ok || got != "invalid port" {
		t.Fatalf("a message without the secret must pass unchanged, got %q %v", got, ok)
	}
}

func TestInspectKeywords(t *testing.T) {
	f := inspectDSN(`host = db  password = 'it\'s a secret' user=x`)
	if f.problem != nil {
		t.Fatal(f.problem)
	}
	found := false
	for _, s := range f.secrets {
		if s == "it's a secret" {
			found = true
		}
	}
	if !found {
		t.Fatalf("secrets %q lack the unescaped password", f.secrets)
	}
}

// A port that accepts TCP but never speaks must be named as such, fast.
func TestSilentPort(t *testing.T) {
	// Held open (and reachable, so no finalizer closes them) until the end.
	var mu sync.Mutex
	var held []net.Conn
	port := serveLoopback(t, func(c net.Conn) { mu.Lock(); held = append(held, c); mu.Unlock() })
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	// The message is the proof that the first-answer wait (answerWait)
	// ended it, not the 5s connect timeout, whatever the machine's speed;
	// the limit only catches a hang.
	err := connectWithin(t, "postgres://u@127.0.0.1:"+itoa(port)+"/db?sslmode=disable", 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not answer the PostgreSQL protocol") {
		t.Fatalf("want 'did not answer the PostgreSQL protocol', got %v", err)
	}
}

// A port whose service talks first (SSH, SMTP) is named as not PostgreSQL.
func TestForeignProtocol(t *testing.T) {
	port := serveLoopback(t, func(c net.Conn) {
		c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
		c.Close()
	})
	err := connectWithin(t, "postgres://u@127.0.0.1:"+itoa(port)+"/db", 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("want a message naming the PostgreSQL protocol, got %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// serveLoopback listens on a free 127.0.0.1 port for the test's duration
// and hands each accepted connection to serve (one goroutine, in order).
func serveLoopback(t *testing.T, serve func(net.Conn)) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// FuzzDSN checks that no connection string makes pgmedic hang, panic, or
// repeat a password of scrubbable length in its message.
func FuzzDSN(f *testing.F) {
	for _, s := range []string{
		"host=127.0.0.1 port=99999 password=abc", "password='abc", "host=x password='abc",
		"postgres://u:S3cr3t-P@ss_word@host/db", "postgres://u:p%40ss@host/db?password=x&sslpassword=y",
		"host=x password=xxxxx", "password=password=password", `password='a\'b' host=`, "postgresql://@/?",
	} {
		f.Add(s, "s3cret-value")
	}
	f.Fuzz(func(t *testing.T, dsn, secret string) {
		facts := inspectDSN(dsn)
		_, _ = facts.scrub(dsn)
		// Plant a known password in a keyword string and in a URL, then
		// check the message built from pgx's error never shows it.
		if len(secret) < minScrubbable || strings.ContainsAny(secret, "'\\ \t\n\r\f\v@/?&%#:=") {
			return
		}
		// parseDSN never dials: no fuzzed host is ever contacted.
		for _, form := range []func(string) string{
			func(pw string) string { return dsn + " password='" + pw + "'" },
			func(pw string) string { return "postgres://u:" + pw + "@" + dsn },
		} {
			// The secret may be a word of the message itself ("alue" in
			// "value"): compare with the message for a neutral password.
			_, _, neutral := parseDSN(form("Qz7Qz7Qz7"))
			if neutral != nil && strings.Contains(neutral.Error(), secret) {
				continue
			}
			d := form(secret)
			_, _, err := parseDSN(d)
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("%q: message shows the password: %v", d, err)
			}
		}
	})
}

// TestOwn: the texts pgmedic's statements reach pg_stat_statements,
// pg_stat_activity and the server log with are recognised; the
// application's, even when they mention pgmedic, are not.
func TestOwn(t *testing.T) {
	for text, want := range map[string]bool{
		Tag + "SELECT 1": true,
		"  \n" + Tag + "EXPLAIN (ANALYZE) EXECUTE x(1)":               true,
		"/* pgmedic */SELECT 1":                                       true,
		"PREPARE pgmedic_verify AS SELECT * FROM t":                   true,
		"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pgmedic_copy_stmt(1)": true,
		"SELECT * FROM orders":                                        false,
		"SELECT 'pgmedic' AS tool":                                    false,
		"SELECT 1 /* pgmedic */":                                      true,
		"SELECT /* pgmedic */ set_config($1, $2, $3)":                 true,
		"SELECT 1 /* pgmedic_report */":                               false,
		"":                                                            false,
	} {
		if got := Own(text); got != want {
			t.Errorf("Own(%q) = %v, want %v", text, got, want)
		}
	}
	if !OwnSession(AppName, "SELECT 1") || OwnSession("web", "SELECT 1") {
		t.Error("OwnSession does not go by application_name")
	}
}
