package diagnose

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func valid() Options {
	return Options{Runs: 5, StatementTimeout: 5 * time.Second, CopyTimeout: 2 * time.Minute,
		MaxCopyBytes: 1 << 30, MaxTables: 100, MaxStatements: 100, SampleFor: time.Second, SampleEvery: 100 * time.Millisecond}
}

// TestValidate: each value no run should use is refused as an input error
// that names its flag.
func TestValidate(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for flag, change := range map[string]func(*Options){
		"--runs":              func(o *Options) { o.Runs = 4 },
		"--verify-max-size":   func(o *Options) { o.MaxCopyBytes = 0 },
		"--statement-timeout": func(o *Options) { o.StatementTimeout = 50 * time.Millisecond },
		"--copy-timeout":      func(o *Options) { o.CopyTimeout = 0 },
		"--max-tables":        func(o *Options) { o.MaxTables = -1 },
		"--rules":             func(o *Options) { o.Rules = []string{"no-such-rule"} },
		"--sample":            func(o *Options) { o.SampleFor = time.Hour },
		"--sample-interval":   func(o *Options) { o.SampleEvery = time.Millisecond },
		"--log":               func(o *Options) { o.LogFiles = []string{"/no/such/server.log"} },
	} {
		o := valid()
		change(&o)
		err := o.Validate()
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: %v", flag, err)
		}
	}
}

func TestServerCores(t *testing.T) {
	for _, c := range []struct {
		flag int
		host string
		want int
	}{
		{8, "db.example.com", 8},
		{0, "db.example.com", 4},
		{0, "10.0.0.5", 4},
		{0, "127.0.0.1", runtime.NumCPU()},
		{0, "::1", runtime.NumCPU()},
		{0, "localhost", runtime.NumCPU()},
		{0, "/var/run/postgresql", runtime.NumCPU()},
	} {
		if got := ServerCores(c.flag, c.host); got != c.want {
			t.Errorf("ServerCores(%d, %q) = %d, want %d", c.flag, c.host, got, c.want)
		}
	}
}
