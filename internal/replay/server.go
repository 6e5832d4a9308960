package replay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgmedic/pgmedic/internal/capture"
	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/lab"
	"github.com/pgmedic/pgmedic/internal/printable"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// Server is a server a replay may write to.
type Server struct {
	dsn string
	cfg *pgconn.Config
	// Lab is set when the server is a pgmedic lab cluster (a twin, or one
	// `lab up` made): each run then replays into a fresh copy of the
	// database, and pools can be started in front of it.
	Lab *lab.Cluster
	// Name says what it is, for reports ("PostgreSQL 15.8, lab cluster").
	Name      string
	start     string
	isLab     bool
	superuser bool
	// canCopy: the role may copy the database (CREATE DATABASE ...
	// TEMPLATE): a superuser, or a role with CREATEDB that owns it (or
	// it is a template); copyWhy says why not.
	canCopy bool
	copyWhy string
}

// OpenServer connects to a replay's server and learns what it is.
func OpenServer(ctx context.Context, dsn string) (*Server, error) {
	cfg, err := envelope.WorkConfig(dsn, envelope.Work{AppName: AppName})
	if err != nil {
		return nil, err
	}
	s := &Server{dsn: dsn, cfg: cfg}
	conn, err := envelope.DialLow(ctx, cfg, setup(""))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s:%d: %s", cfg.Host, cfg.Port, envelope.Message(err))
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, `SELECT current_setting('server_version'), current_setting('cluster_name'), pg_postmaster_start_time()::text,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)::text,
		CASE WHEN pg_has_role('pg_read_all_settings', 'member') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN current_setting('data_directory') ELSE '' END,
		(SELECT rolcreatedb FROM pg_roles WHERE rolname = current_user)::text,
		(SELECT datdba = (SELECT oid FROM pg_roles WHERE rolname = current_user) OR datistemplate FROM pg_database WHERE datname = current_database())::text`).ReadAll()
	if err != nil || len(res) == 0 || len(res[0].Rows) == 0 {
		return nil, fmt.Errorf("reading what the server is: %s", envelope.Message(err))
	}
	row := res[0].Rows[0]
	version, cluster := string(row[0]), string(row[1])
	s.start, s.superuser = string(row[2]), string(row[3]) == "true"
	createdb, owns := string(row[5]) == "true", string(row[6]) == "true"
	switch {
	case s.superuser || createdb && owns:
		s.canCopy = true
	case !createdb:
		s.copyWhy = fmt.Sprintf("role %s may not create databases (ALTER ROLE %s CREATEDB)", cfg.User, sqlparse.QuoteIdent(cfg.User))
	default:
		s.copyWhy = fmt.Sprintf("role %s does not own database %s, and only its owner may copy it", cfg.User, cfg.Database)
	}
	s.isLab = cluster == lab.ClusterName
	s.Name = "PostgreSQL " + version
	if s.isLab {
		s.Name += ", pgmedic lab cluster"
		if dir := string(row[4]); dir != "" {
			if c, err := lab.Load(filepath.Dir(dir)); err == nil {
				s.Lab = c
			}
		}
	}
	return s, nil
}

// Database is the database the DSN names.
func (s *Server) Database() string { return s.cfg.Database }

// Guard refuses a replay that would write to a server that is neither a
// lab cluster nor named by --allow-writes-to, and always refuses the
// server the log came from unless it is named so.
func (s *Server) Guard(ctx context.Context, allowed []string, source string) error {
	named := false
	var near []string
	for _, a := range allowed {
		same, why, err := s.names(a)
		if err != nil {
			return fmt.Errorf("--allow-writes-to: %w", err)
		}
		named = named || same
		if !same && why != "" {
			near = append(near, why)
		}
	}
	if len(near) > 0 && !named {
		return fmt.Errorf("--allow-writes-to names %s; the replay writes to %s as %s: name that database and role to allow it", strings.Join(near, " and "), endpoint(s.cfg.Host, s.cfg.Port)+"/"+s.cfg.Database, s.cfg.User)
	}
	if source != "" && !named {
		src, err := OpenServer(ctx, source)
		if err != nil {
			return fmt.Errorf("--source: %w", err)
		}
		if src.start == s.start && src.cfg.Host == s.cfg.Host {
			return errors.New("the replay's server is the one the log came from (--source): a replay writes, so pgmedic replays only against a twin or a server --allow-writes-to names")
		}
	}
	if !s.isLab && !named {
		return fmt.Errorf("%s:%d is not a pgmedic twin or lab cluster, and a replay writes (its INSERTs, UPDATEs and DDL run as logged): replay against a twin (--twin, pgmedic lab up), or name this server with --allow-writes-to DSN; --dry-run shows what would be sent", s.cfg.Host, s.cfg.Port)
	}
	return nil
}

// SideOptions are what one side of a comparison changes.
type SideOptions struct {
	Name string
	// Apply are statements run on the side's copy before each run (an
	// index, a migration).
	Apply []string
	// Settings are given to the side's sessions (jit = off).
	Settings map[string]string
	// Pool, when more than 0, puts PgBouncer in transaction mode with
	// that many server connections between the sessions and the server.
	Pool int
	// Users are the roles sessions connect as, for the pool's user list.
	Users []string
}

// Fresh says whether a run can replay into a fresh copy of the database
// (CREATE DATABASE ... TEMPLATE, where the role may), rather than into
// the database itself. A comparison needs it: on any server, lab or not,
// each run of each side starts from the same rows, and the database the
// DSN names is never written (Compare refuses otherwise). A single
// replay copies on a lab cluster, and on a server --allow-writes-to
// named replays in place, as the user asked (its sessions may be
// connected there, which a copy does not allow).
func (s *Server) Fresh() bool { return s.canCopy }

// Side makes one side of a comparison on this server.
func (s *Server) Side(o SideOptions) (Side, error) {
	if o.Pool > 0 && s.Lab == nil {
		return Side{}, fmt.Errorf("a pool (--pool) is started only in front of a pgmedic lab cluster or twin whose files this user can reach; %s is not one", s.Name)
	}
	return Side{Name: o.Name, Fresh: s.Fresh(), NoCopy: s.copyWhy,
		Open: func(ctx context.Context, run int) (*Target, error) {
			return s.open(ctx, o, run, s.Lab != nil && s.canCopy)
		},
		OpenCopy: func(ctx context.Context, run int) (*Target, error) { return s.open(ctx, o, run, true) }}, nil
}

// Target readies one run on this server.
func (s *Server) open(ctx context.Context, o SideOptions, run int, copied bool) (_ *Target, err error) {
	db := s.cfg.Database
	var cleanups []func()
	t := &Target{Where: s.Name}
	t.Close = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	admin := func(ctx context.Context, database string) (*pgconn.PgConn, error) {
		return envelope.DialLow(ctx, s.cfg, setup(database))
	}
	if copied {
		// A copy of the database per run: every run starts from the same
		// rows, whatever the last one inserted, updated or consumed.
		// The process id keeps two replays on one server apart.
		copyName := fmt.Sprintf("pgmedic_replay_%d_%d", os.Getpid(), run)
		conn, err := admin(ctx, "postgres")
		if err != nil {
			return nil, fmt.Errorf("connecting to make the run's copy: %s", envelope.Message(err))
		}
		defer conn.Close(context.Background())
		q := func(sql string) error { _, err := conn.Exec(ctx, sql).ReadAll(); return err }
		q("DROP DATABASE IF EXISTS " + sqlparse.QuoteIdent(copyName))
		if err := q("CREATE DATABASE " + sqlparse.QuoteIdent(copyName) + " TEMPLATE " + sqlparse.QuoteIdent(db)); err != nil {
			return nil, fmt.Errorf("copying database %s for the run (no other session may be connected to it): %s", db, envelope.Message(err))
		}
		cleanups = append(cleanups, func() {
			c, err := admin(context.Background(), "postgres")
			if err != nil {
				return
			}
			defer c.Close(context.Background())
			// FORCE ends sessions a stopped replay left (PostgreSQL 13+).
			if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+sqlparse.QuoteIdent(copyName)+" WITH (FORCE)").ReadAll(); err != nil {
				c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+sqlparse.QuoteIdent(copyName)).ReadAll()
			}
		})
		// CREATE DATABASE ... TEMPLATE copies the rows, not the
		// database's own settings (ALTER DATABASE ... SET): they are
		// carried over, since they are part of how the application runs.
		res, err := conn.Exec(ctx, "SELECT unnest(setconfig) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE s.setrole = 0 AND d.datname = "+sqlparse.QuoteLiteral(db)).ReadAll()
		if err == nil && len(res) > 0 {
			for _, row := range res[0].Rows {
				if k, v, ok := strings.Cut(string(row[0]), "="); ok {
					q(fmt.Sprintf("ALTER DATABASE %s SET %s = %s", sqlparse.QuoteIdent(copyName), sqlparse.QuoteIdent(k), sqlparse.QuoteLiteral(v)))
				}
			}
		}
		for _, k := range sortedKeys(o.Settings) {
			if err := q(fmt.Sprintf("ALTER DATABASE %s SET %s = %s", sqlparse.QuoteIdent(copyName), sqlparse.QuoteIdent(k), sqlparse.QuoteLiteral(o.Settings[k]))); err != nil {
				return nil, fmt.Errorf("setting %s = %s: %s", k, o.Settings[k], envelope.Message(err))
			}
		}
		db = copyName
		t.Where += ", a fresh copy of " + s.cfg.Database + " per run"
	} else {
		t.Where += ", in place: each run starts where the last one left the database"
	}
	if len(o.Apply) > 0 {
		conn, err := admin(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("connecting to apply the change: %s", envelope.Message(err))
		}
		for _, sql := range o.Apply {
			if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
				conn.Close(context.Background())
				return nil, fmt.Errorf("applying %q: %s", printable.Clip(sql, 80), envelope.Message(err))
			}
		}
		conn.Close(context.Background())
	}
	host, port := s.cfg.Host, s.cfg.Port
	if o.Pool > 0 {
		b, err := s.Lab.StartPgBouncer(ctx, lab.BouncerOptions{PoolSize: o.Pool, Mode: "transaction", Users: o.Users})
		if err != nil {
			return nil, fmt.Errorf("starting PgBouncer: %w", err)
		}
		cleanups = append(cleanups, b.Stop)
		host, port = "127.0.0.1", uint16(b.Port)
		t.NoPrepare = true
		t.Where += fmt.Sprintf(", through PgBouncer (transaction mode, %d server connections)", o.Pool)
	}
	fresh := copied
	t.Connect = func(ctx context.Context, sess *capture.Session) (*pgconn.PgConn, error) {
		// A statement past the client's timeout is cancelled on the
		// server and the session goes on, as a client's timeout does
		// (envelope.DialLow sends the cancel request).
		return envelope.DialLow(ctx, s.cfg, func(c *pgconn.Config) {
			retarget(c, host, port)
			c.Database = db
			c.RuntimeParams = map[string]string{"application_name": AppName}
			if !fresh && o.Pool == 0 {
				for k, v := range o.Settings {
					c.RuntimeParams[k] = v
				}
			}
		})
	}
	t.ConnectAdmin = func(ctx context.Context) (*pgconn.PgConn, error) { return admin(ctx, db) }
	if !fresh && len(o.Settings) > 0 && o.Pool > 0 {
		return nil, errors.New("settings through a pool need a lab cluster, where they are set on the run's copy of the database")
	}
	return t, nil
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// setup is how a replay's own set-up connections differ from its sessions:
// their name, and the database they work in ("" keeps the DSN's).
func setup(database string) func(*pgconn.Config) {
	return func(c *pgconn.Config) {
		if database != "" {
			c.Database = database
		}
		c.RuntimeParams = map[string]string{"application_name": AppName + " setup"}
	}
}

// retarget points a connection's config at host:port, keeping its way of
// trying TLS. A DSN without sslmode is libpq's "prefer": pgx parses it as
// TLS first with a plain fallback, and dropping the fallbacks would make
// every session require TLS from a server that may not offer it (each
// "could not connect"). The fallbacks are kept, at the new address, one
// per way of connecting.
func retarget(c *pgconn.Config, host string, port uint16) {
	c.Host, c.Port = host, port
	var kept []*pgconn.FallbackConfig
	seen := map[bool]bool{c.TLSConfig != nil: true}
	for _, fb := range c.Fallbacks {
		tls := fb.TLSConfig != nil
		if seen[tls] {
			continue
		}
		seen[tls] = true
		kept = append(kept, &pgconn.FallbackConfig{Host: host, Port: port, TLSConfig: fb.TLSConfig})
	}
	c.Fallbacks = kept
}

// names says whether an --allow-writes-to DSN names this server's
// database as this replay's role: the same host and port, database and
// user, however each DSN spells them (a URL or key=value, localhost or
// 127.0.0.1, the libpq environment filling what it leaves out). When it
// names the same server but another database or role, why says which.
func (s *Server) names(dsn string) (same bool, why string, err error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false, "", fmt.Errorf("%s", envelope.Message(err))
	}
	if !sameHost(cfg.Host, s.cfg.Host) || cfg.Port != s.cfg.Port {
		return false, "", nil
	}
	switch {
	case cfg.Database != s.cfg.Database:
		return false, fmt.Sprintf("database %s on that server", cfg.Database), nil
	case cfg.User != s.cfg.User:
		return false, fmt.Sprintf("role %s on that server", cfg.User), nil
	}
	return true, "", nil
}

// sameHost compares two hosts as a client reaches them: names compared
// without case, loopback names and addresses as one.
func sameHost(a, b string) bool {
	loop := func(h string) bool {
		if strings.EqualFold(h, "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return strings.EqualFold(a, b) || (loop(a) && loop(b))
}

// endpoint writes host:port (a socket directory as it is).
func endpoint(host string, port uint16) string {
	return fmt.Sprintf("%s:%d", host, port)
}
