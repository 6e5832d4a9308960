package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
)

// ErrNoPgBouncer says the pgbouncer binary is not installed.
var ErrNoPgBouncer = errors.New("pgbouncer is not installed: apt-get install pgbouncer")

// Bouncer is a PgBouncer the lab started in front of its cluster, in the
// cluster's directory, run by the cluster's owner (PgBouncer refuses root).
type Bouncer struct {
	Dir       string
	Port      int
	PoolSize  int
	Mode      string
	superuser string
	pid       int
}

// BouncerOptions configure StartPgBouncer.
type BouncerOptions struct {
	PoolSize int    // server connections per database and user (default 4)
	Mode     string // transaction (default), session or statement
	Users    []string
}

// FindPgBouncer returns the pgbouncer binary.
func FindPgBouncer() (string, error) {
	for _, p := range []string{os.Getenv("PGMEDIC_PGBOUNCER"), "/usr/sbin/pgbouncer"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	return "", ErrNoPgBouncer
}

// StartPgBouncer starts PgBouncer in front of the cluster, accepting every
// user the cluster trusts, with the cluster's superuser as its admin.
func (c *Cluster) StartPgBouncer(ctx context.Context, o BouncerOptions) (*Bouncer, error) {
	bin, err := FindPgBouncer()
	if err != nil {
		return nil, err
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 4
	}
	if o.Mode == "" {
		o.Mode = "transaction"
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &Bouncer{Dir: filepath.Join(c.Dir, "pgbouncer"), Port: port, PoolSize: o.PoolSize, Mode: o.Mode, superuser: c.Superuser}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.writeBouncerFiles(b, o.Users); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, filepath.Join(b.Dir, "pgbouncer.ini"))
	cmd.Dir = b.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.owner != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.owner.uid, Gid: c.owner.gid}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting pgbouncer: %w", err)
	}
	b.pid = cmd.Process.Pid
	go cmd.Wait() // reap it when it exits
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Stop()
			log, _ := os.ReadFile(filepath.Join(b.Dir, "pgbouncer.log"))
			return nil, fmt.Errorf("pgbouncer did not start listening on port %d: %s", port, lastLine(string(log)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeBouncerFiles writes PgBouncer's configuration and user list into
// its directory, owned by the server's user, which PgBouncer runs as.
func (c *Cluster) writeBouncerFiles(b *Bouncer, appUsers []string) error {
	users := append([]string{c.Superuser}, appUsers...)
	var list strings.Builder
	for _, u := range users {
		fmt.Fprintf(&list, "%q \"\"\n", u)
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
stats_users = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 500
stats_period = 1
ignore_startup_parameters = extra_float_digits,options
logfile = %s
pidfile = %s
`, c.Host, c.Port, b.Port, filepath.Join(b.Dir, "userlist.txt"), c.Superuser, c.Superuser, b.Mode, b.PoolSize,
		filepath.Join(b.Dir, "pgbouncer.log"), filepath.Join(b.Dir, "pgbouncer.pid"))
	for name, body := range map[string]string{"userlist.txt": list.String(), "pgbouncer.ini": conf} {
		p := filepath.Join(b.Dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
		if err := c.chown(p); err != nil {
			return err
		}
	}
	return c.chown(b.Dir)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// DSN connects through the bouncer as user to database db.
func (b *Bouncer) DSN(user, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", user, b.Port, db)
}

// AdminDSN is the bouncer's admin console (database pgbouncer).
func (b *Bouncer) AdminDSN() string { return b.DSN(b.superuser, "pgbouncer") }

// Stop ends the bouncer the lab started, by its pid.
func (b *Bouncer) Stop() {
	if b == nil || b.pid == 0 {
		return
	}
	syscall.Kill(b.pid, syscall.SIGTERM)
	for i := 0; i < 50 && alive(b.pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(b.pid) {
		syscall.Kill(b.pid, syscall.SIGKILL)
	}
	b.pid = 0
}

// stopBouncer ends a bouncer left running in the cluster's directory (by
// the pid it wrote there, and only if that process is pgbouncer).
func (c *Cluster) stopBouncer() {
	raw, err := os.ReadFile(filepath.Join(c.Dir, "pgbouncer", "pgbouncer.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "pgbouncer" {
		return
	}
	(&Bouncer{pid: pid}).Stop()
}

// Reconnect drops PgBouncer's connections to database db (KILL, then
// RESUME so it accepts clients again), so new server connections pick up
// changed role settings. Call it with no client connected.
func (b *Bouncer) Reconnect(ctx context.Context, db string) error {
	conn, err := envelope.Dial(ctx, b.AdminDSN(), envelope.Work{SimpleProtocol: true})
	if err != nil {
		return fmt.Errorf("connecting to PgBouncer's console: %w", err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{"KILL " + db, "RESUME " + db} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("PgBouncer %s: %w", q, err)
		}
	}
	return nil
}
