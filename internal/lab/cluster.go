// Package lab runs throwaway PostgreSQL clusters from the locally installed
// binaries and reproduces the incidents pgmedic is built from.
//
// A cluster lives entirely in one directory: PGDATA in data/, the server log
// in server.log and the connection facts in state.json. Removing the
// directory (after stopping the server) removes every trace of it.
//
// state.json is written first, before initdb, and again before the server
// starts, so a pgmedic killed at any step (kill -9 included) leaves a
// directory that `lab status` and `lab down` recognise and clean up: see
// state.go.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgmedic/pgmedic/internal/pgversion"
)

// Cluster is a running (or stopped) throwaway cluster.
type Cluster struct {
	Dir    string `json:"dir"`
	BinDir string `json:"bin_dir"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Superuser is the database superuser created by initdb.
	Superuser string `json:"superuser"`
	// HypoPG reports whether the hypopg extension is installed for this
	// server, JIT whether it was built with LLVM.
	HypoPG  bool   `json:"hypopg"`
	JIT     bool   `json:"jit"`
	Version string `json:"version"`
	// Major is the server's major version; Source where its binaries
	// were found (lab.Server).
	Major  int    `json:"major"`
	Source string `json:"source"`
	// Phase is how far Create got: initdb, starting, running.
	Phase string `json:"phase"`
	// OwnerPID is the pgmedic process that created the cluster; a
	// throwaway cluster whose owner is gone is a leftover.
	OwnerPID int `json:"owner_pid"`
	// Throwaway clusters are removed by the command that made them.
	Throwaway bool `json:"throwaway"`
	// Standby is the cluster's streaming standby (Options.Standby), in
	// the standby directory inside Dir; nil for none.
	Standby *Cluster `json:"standby,omitempty"`

	owner *osUser // OS account that owns and runs the cluster; nil = ourselves
}

type osUser struct {
	name     string
	uid, gid uint32
}

// Options configure Create.
type Options struct {
	// Dir is the state directory; it must not exist or be empty. Empty means a
	// new temporary directory.
	Dir string
	// BinDir overrides discovery of the PostgreSQL binaries.
	BinDir string
	// Major asks for a server of this major version (0: the first found).
	Major int
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Started, when set, is told the directory as soon as it exists, so
	// that a throwaway cluster's location is known even if pgmedic dies.
	Started func(dir string)

	// Config is added to the lab's postgresql.conf (tests that need, say,
	// the logging collector).
	Config string
	// Standby gives the cluster a streaming standby of its own.
	Standby bool

	// afterStart lets tests fail setup half-way.
	afterStart func(*Cluster) error
}

// DefaultDir is where `pgmedic lab up` keeps its cluster unless told otherwise.
// When pgmedic runs as root the server runs as the postgres account, which
// cannot enter root's home, so the directory goes to the system temp dir.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return filepath.Join(os.TempDir(), "pgmedic-lab")
	}
	if cache, err := os.UserCacheDir(); err == nil {
		return filepath.Join(cache, "pgmedic", "lab")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("pgmedic-lab-%d", os.Getuid()))
}

// Create initialises and starts a new cluster. On any failure everything it
// made (processes and directories) is removed before it returns.
func Create(ctx context.Context, opts Options) (c *Cluster, err error) {
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	srv, err := FindServer(opts.BinDir, opts.Major)
	if err != nil {
		return nil, err
	}
	binDir := srv.BinDir
	owner, err := serverOwner()
	if err != nil {
		return nil, err
	}

	dir, err := makeLabDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	madeDir := true
	c = &Cluster{Dir: dir, BinDir: binDir, Host: "127.0.0.1", Superuser: "postgres", owner: owner,
		Major: srv.Major, Source: srv.Source, JIT: srv.JIT, HypoPG: srv.HypoPG,
		Phase: PhaseInitdb, OwnerPID: os.Getpid(), Throwaway: opts.Dir == ""}
	defer func() {
		if err != nil {
			_ = c.Stop(context.Background())
			c.killStragglers()
			if madeDir {
				_ = os.RemoveAll(dir)
			}
			c = nil
			if ctx.Err() != nil {
				err = ctx.Err()
			}
		}
	}()
	if err = c.save(); err != nil {
		return c, err
	}
	if opts.Started != nil {
		opts.Started(dir)
	}
	if err = c.chown(dir); err != nil {
		return c, err
	}
	logf("initdb in %s", dir)
	if err = c.run(ctx, "initdb", "-D", c.dataDir(), "-U", c.Superuser, "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		return c, fmt.Errorf("initdb failed: %w", err)
	}
	config := opts.Config
	if opts.Standby {
		logf("copying the data directory for a standby")
		if c.Standby, err = c.copyForStandby(); err != nil {
			return c, err
		}
		config += primaryConfig
	}
	if err = c.startOnFreePort(ctx, config, logf); err != nil {
		return c, err
	}
	if c.Version, err = c.serverVersion(); err != nil {
		return c, err
	}
	if c.Standby != nil {
		if err = c.startStandby(ctx, c.Standby, logf); err != nil {
			return c, err
		}
	}
	if opts.afterStart != nil {
		if err = opts.afterStart(c); err != nil {
			return c, err
		}
	}
	c.Phase = PhaseRunning
	if err = c.save(); err != nil {
		return c, err
	}
	return c, nil
}

// makeLabDir makes the lab's directory: a new temporary one, or dir, which
// must not hold anything yet (a cluster there is named, with lab down).
func makeLabDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "pgmedic-lab-")
		if err != nil {
			return "", fmt.Errorf("creating the lab directory: %w", err)
		}
		return d, nil
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
			return "", fmt.Errorf("a lab cluster already exists in %s: run `pgmedic lab down --dir %s` first", dir, dir)
		}
		return "", fmt.Errorf("lab directory %s is not empty: choose another --dir", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the lab directory: %w", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir, nil
}

// startOnFreePort writes the configuration with a free port and starts
// the server. The port is picked free, but another process may take it
// before the server binds: it tries three ports before giving up.
func (c *Cluster) startOnFreePort(ctx context.Context, config string, logf func(string, ...any)) (err error) {
	for attempt := 0; attempt < 3; attempt++ {
		if c.Port, err = freePort(); err != nil {
			return err
		}
		if err = c.writeConfig(config); err != nil {
			return err
		}
		// Recorded before the server starts: a pgmedic killed from here on
		// leaves a server that lab status and lab down can find.
		c.Phase = PhaseStarting
		if err = c.save(); err != nil {
			return err
		}
		logf("starting PostgreSQL on 127.0.0.1:%d", c.Port)
		if err = c.start(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

const stateFile = "state.json"

// PasswordRole is the only lab role that must give a password.
const PasswordRole = "pw_user"

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.Dir, "server.log") }

// DSN returns a libpq URL for a database of the cluster.
func (c *Cluster) DSN(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", c.Superuser, c.Host, c.Port, db)
}

// UserDSN returns a libpq URL for a given role (trust authentication, no password).
func (c *Cluster) UserDSN(role, db string) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", role, c.Host, c.Port, db)
}

// ClusterName marks a lab cluster (cluster_name): replay writes only to a
// server that carries it, unless the user names another.
const ClusterName = "pgmedic lab"

// writeConfig appends pgmedic's lab settings to postgresql.conf. JIT is left
// at PostgreSQL's defaults on purpose: the lab must behave like the servers
// users really run.
func (c *Cluster) writeConfig(extra string) error {
	conf := fmt.Sprintf(`
# --- pgmedic lab ---
cluster_name = '%s'
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = ''
max_connections = 100
max_prepared_transactions = 10
shared_buffers = 128MB
fsync = off
synchronous_commit = off
full_page_writes = on
shared_preload_libraries = 'pg_stat_statements,auto_explain'
track_io_timing = on
pg_stat_statements.track = top
pg_stat_statements.max = 5000
auto_explain.log_min_duration = '1s'
auto_explain.log_format = 'json'
log_min_duration_statement = '1s'
log_line_prefix = '%%m [%%p] %%q%%u@%%d '
`, ClusterName, c.Port) + c.versionConfig() + extra + "\n"
	path := filepath.Join(c.dataDir(), "postgresql.conf")
	base, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading postgresql.conf: %w", err)
	}
	if i := bytes.Index(base, []byte("\n# --- pgmedic lab ---")); i >= 0 {
		base = base[:i]
	}
	if err := os.WriteFile(path, append(base, conf...), 0o600); err != nil {
		return fmt.Errorf("writing postgresql.conf: %w", err)
	}
	if err := c.chown(path); err != nil {
		return err
	}
	// Trust for everyone on loopback, except the role PasswordRole, which
	// must authenticate: it lets tests exercise wrong-password handling.
	hba := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n", PasswordRole)
	hbaPath := filepath.Join(c.dataDir(), "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		return fmt.Errorf("writing pg_hba.conf: %w", err)
	}
	return c.chown(hbaPath)
}

// versionConfig is the configuration that depends on the server's major
// version: compute_query_id ties pg_stat_activity to pg_stat_statements
// from 14 (13 has neither the setting nor the column).
func (c *Cluster) versionConfig() string {
	if pgversion.ForMajor(c.Major).QueryIDInActivity {
		return "compute_query_id = on\n"
	}
	return ""
}

func (c *Cluster) start(ctx context.Context) error {
	err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-l", c.logFile(), "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("starting the lab server failed: %w (server log: %s)", err, lastLines(c.logFile(), 5))
	}
	return nil
}

// Restart stops the server and starts it again on the same port, after
// down: what a client sees of a restart or a failover (watch's tests).
func (c *Cluster) Restart(ctx context.Context, down time.Duration) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	time.Sleep(down)
	return c.start(ctx)
}

// ResetWAL stops the server, runs pg_resetwal with args on its data
// directory, and starts it again on the same port. A scenario uses it to
// set a counter of the control file (-O, the next multixact offset) that
// years of traffic would have moved, as a held-out wraparound case uses
// -x: it is only ever run on a throwaway lab cluster.
func (c *Cluster) ResetWAL(ctx context.Context, args ...string) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	if err := c.run(ctx, "pg_resetwal", append(args, c.dataDir())...); err != nil {
		return fmt.Errorf("resetting the lab server's WAL: %w", err)
	}
	return c.start(ctx)
}

// HasTool says whether the server's build carries a program (the npm
// builds carry initdb, pg_ctl and postgres only).
func (c *Cluster) HasTool(name string) bool {
	return isFile(filepath.Join(c.BinDir, name))
}

// Stop stops the server (fast shutdown) if it runs. It is safe to call on a
// cluster that never started.
func (c *Cluster) Stop(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err != nil {
		return nil
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		// A fast shutdown that hangs must not leave an orphan behind.
		if pid := c.PostmasterPID(); c.ownsProcess(pid) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			if c.WaitGone(pid, 10*time.Second) {
				return nil
			}
		}
		if !c.Running() {
			return nil
		}
		return fmt.Errorf("stopping the lab server: %w", err)
	}
	return nil
}

// Destroy stops the server, ends any initdb or postgres process still
// working in the directory, and removes it.
func (c *Cluster) Destroy(ctx context.Context) error {
	c.stopBouncer()
	if s := c.Standby; s != nil {
		// Its directory is inside the primary's: stopped first, and any
		// of its processes ended, before the tree goes.
		s.owner = c.owner
		_ = s.Stop(ctx)
		s.killStragglers()
	}
	halfMade := !c.Complete()
	stopErr := c.Stop(ctx)
	// A server whose start was under way when its pgmedic was killed can
	// come up while the directory is being removed (pg_ctl's shell execs
	// it late): end what appears and try again, for a few seconds.
	var err error
	for try := 0; try < 10; try++ {
		c.killStragglers()
		if err = os.RemoveAll(c.Dir); err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", c.Dir, err)
	}
	if halfMade {
		c.settle(time.Second)
	}
	return stopErr
}

// settle watches, once the directory is gone, for a process still on its
// way into it: a pgmedic killed while it started pg_ctl (or pg_ctl its
// server) leaves a child that is forked but not yet running the program,
// which no look at the process list can tell from anything else until it
// does. Such a child starts within milliseconds; settle returns once no
// process of the cluster has been seen for quiet, ending each that shows
// up (it finds no data directory and would stop by itself, but lab down
// must leave nothing running when it returns).
func (c *Cluster) settle(quiet time.Duration) {
	lastSeen := time.Now()
	for time.Since(lastSeen) < quiet {
		if len(c.stragglers()) > 0 {
			c.killStragglers()
			_ = os.RemoveAll(c.Dir)
			lastSeen = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PostmasterPID returns the server's pid from postmaster.pid, or 0.
func (c *Cluster) PostmasterPID() int {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// Running reports whether the server process is alive.
func (c *Cluster) Running() bool {
	return c.ownsProcess(c.PostmasterPID())
}

// alive reports whether pid is a live process. A zombie counts as dead: the
// postmaster is re-parented when pg_ctl exits, and in containers whose init
// does not reap, its corpse would otherwise look alive.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

func (c *Cluster) serverVersion() (string, error) {
	out, err := exec.Command(filepath.Join(c.BinDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("asking postgres for its version: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// run executes a PostgreSQL binary as the cluster's owner.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, name), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = c.Dir
	// Own process group: a Ctrl-C on the terminal reaches pgmedic, which then
	// shuts the server down in order, instead of killing pg_ctl half-way.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.owner != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.owner.uid, Gid: c.owner.gid}
		cmd.Env = append(os.Environ(), "HOME="+c.Dir, "USER="+c.owner.name)
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // interrupted: the tool's output is noise
		}
		msg := strings.TrimSpace(out.String())
		if len(msg) > 400 {
			msg = msg[len(msg)-400:]
		}
		return fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return nil
}

// serverOwner picks the OS account that runs the server. initdb refuses to
// run as root, so root hands the cluster to the postgres account.
func serverOwner() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root, the lab needs the `postgres` OS account to own the cluster (initdb refuses root): install postgresql-15, which creates it, or run pgmedic as another user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &osUser{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

func (c *Cluster) chown(path string) error {
	if c.owner == nil {
		return nil
	}
	if err := os.Chown(path, int(c.owner.uid), int(c.owner.gid)); err != nil {
		return fmt.Errorf("handing %s to the postgres account: %w", path, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLines is the end of a log file, for an error message.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// WaitGone waits until the server process has exited.
func (c *Cluster) WaitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
