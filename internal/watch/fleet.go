package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"go.yaml.in/yaml/v3"
)

// Fleet is a --targets file:
//
//	targets:
//	  - name: orders-primary
//	    dsn: postgres://pgmedic@db1:5432/orders
//	    pgbouncer: postgres://pgbouncer@db1:6432/pgbouncer
//	    labels: {env: prod, team: payments}
//	    server_cores: 16
type Fleet struct {
	Targets []Target `yaml:"targets"`
}

// targetName is compiled when a fleet file is read: its bounded repeat
// makes a large program, which every command would build at start.
var targetName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) })

// ParseFleet reads a --targets file; unknown keys, missing names or DSNs
// and duplicate names are refused with the target they are in.
func ParseFleet(data []byte, path string) (*Fleet, error) {
	var f Fleet
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("--targets %s is empty: list the servers under targets: (name, dsn)", path)
		}
		return nil, fmt.Errorf("--targets %s: %s", path, yamlError(err))
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("--targets %s lists no targets: give each a name and a dsn under targets:", path)
	}
	seen := map[string]bool{}
	for i, t := range f.Targets {
		switch {
		case !targetName().MatchString(t.Name):
			return nil, fmt.Errorf("--targets %s: target %d needs a name of letters, digits, '.', '_' and '-' (it names its directory), not %q", path, i+1, t.Name)
		case seen[t.Name]:
			return nil, fmt.Errorf("--targets %s: two targets are named %q", path, t.Name)
		case strings.TrimSpace(t.DSN) == "":
			return nil, fmt.Errorf("--targets %s: target %q has no dsn", path, t.Name)
		case dsnProblem(t.DSN) != "":
			return nil, fmt.Errorf("--targets %s: the dsn of target %q does not parse (%s): give postgres://user@host:port/dbname or key=value pairs", path, t.Name, dsnProblem(t.DSN))
		case t.PgBouncer != "" && dsnProblem(t.PgBouncer) != "":
			return nil, fmt.Errorf("--targets %s: the pgbouncer dsn of target %q does not parse (%s): give postgres://user@host:6432/pgbouncer", path, t.Name, dsnProblem(t.PgBouncer))
		case t.ServerCores < 0:
			return nil, fmt.Errorf("--targets %s: target %q: server_cores must be positive", path, t.Name)
		}
		seen[t.Name] = true
	}
	return &f, nil
}

// Shard keeps the targets of shard i of n (1-based): each target's name
// hashed, so every process given the same file and its own i takes its
// own share, with no coordination and the same split every time.
func (f *Fleet) Shard(i, n int) []Target {
	var out []Target
	for _, t := range f.Targets {
		h := fnv.New32a()
		h.Write([]byte(t.Name))
		if int(h.Sum32()%uint32(n)) == i-1 {
			out = append(out, t)
		}
	}
	return out
}

// ParseShard reads --shard I/N.
func ParseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("--shard %q: say I/N with 1 <= I <= N (shard 2 of 4 is 2/4)", s)
	}
	return i, n, nil
}

// Connections is what watching targets costs in connections: one each,
// and one more for a PgBouncer console.
func Connections(ts []Target) int {
	n := 0
	for _, t := range ts {
		n++
		if t.PgBouncer != "" {
			n++
		}
	}
	return n
}

// WatchAll watches every target from one process, each in its own
// goroutine with its own directory under cfg.Dir; it returns when ctx
// ends (or cfg.Duration passes), every open incident written.
func WatchAll(ctx context.Context, ts []Target, cfg Config) map[string]Stats {
	var mu sync.Mutex
	out := map[string]Stats{}
	var wg sync.WaitGroup
	for _, t := range ts {
		cfg.Metrics.Register(t)
		c := cfg
		c.Dir = filepath.Join(cfg.Dir, t.Name)
		c.FailFast = false // one unreachable server must not stop the others
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := Watch(ctx, t, c)
			if err != nil {
				cfg.Log("%s: %v", t.Name, err)
			}
			mu.Lock()
			out[t.Name] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// dsnProblem says which part of a connection string does not parse ("" when
// it parses), in the envelope's words, which never quote a password.
func dsnProblem(dsn string) string {
	_, err := envelope.WorkConfig(dsn, envelope.Work{})
	var ce *envelope.ConnectError
	if err == nil {
		return ""
	}
	if !errors.As(err, &ce) {
		return "it does not parse"
	}
	if inner, ok := strings.CutPrefix(ce.Cause, "invalid connection string ("); ok {
		return strings.TrimSuffix(inner, ")")
	}
	if ce.Fix != "" {
		return ce.Fix
	}
	return ce.Cause
}

// yamlError says what the YAML reader refused, on one line, without the
// values it quotes (a DSN in the wrong place would show its password) and
// in the file's terms rather than Go's.
func yamlError(err error) string {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "yaml: unmarshal errors:", "")), " ")
	msg = regexp.MustCompile("`[^`]*`|'[^']*'").ReplaceAllString(msg, "a value")
	// An unknown key is named when it is a word (a typo: dns for dsn);
	// anything else may be a connection string put where a key goes.
	msg = regexp.MustCompile(`field (.*?) not found in type`).ReplaceAllStringFunc(msg, func(m string) string {
		key := strings.TrimSuffix(strings.TrimPrefix(m, "field "), " not found in type")
		if regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`).MatchString(key) {
			return "unknown key " + key + " in"
		}
		return "a key that is not a word in"
	})
	return strings.NewReplacer("[]watch.Target", "a list of targets", "watch.Target", "a target (name, dsn, pgbouncer, labels, server_cores)",
		"watch.Fleet", "the file (its top level is targets:)", "map[string]string", "labels (key: value)").Replace(msg)
}

// NameOf names a single target after the server and database its DSN
// reaches ("db.example.com:5432/shop"; the libpq environment's when the
// DSN is empty), never its user or password; "target" when it does not
// parse (connecting then says why).
func NameOf(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "target"
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}
