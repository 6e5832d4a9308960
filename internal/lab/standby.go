package lab

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
)

// StandbyName is the application_name the lab's standby streams under:
// what pg_stat_replication and the findings call it.
const StandbyName = "lab_standby"

// standbyConfig is the standby's own configuration beside the lab's:
// a hot standby that answers queries, and the primary's WAL kept long
// enough for it to connect after a restart.
const standbyConfig = "hot_standby = on\n"

// primaryConfig keeps WAL on the primary for a standby that falls behind
// or restarts (the lab has no archive to fetch it from).
const primaryConfig = "wal_keep_size = '256MB'\n"

// copyForStandby copies the primary's data directory, initdb's fresh
// one, before the primary ever starts: a copy of a cleanly shut down
// cluster is a valid base for a standby, which then streams every WAL
// record the primary writes from its first start. No pg_basebackup is
// needed (the server-only builds the lab installs for other majors do
// not carry one, and a client of one major cannot back up a newer server).
func (c *Cluster) copyForStandby() (*Cluster, error) {
	s := &Cluster{Dir: filepath.Join(c.Dir, "standby"), BinDir: c.BinDir, Host: c.Host, Superuser: c.Superuser, owner: c.owner,
		Major: c.Major, Source: c.Source, JIT: c.JIT, HypoPG: c.HypoPG, Phase: PhaseInitdb, OwnerPID: c.OwnerPID, Throwaway: c.Throwaway}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the standby's directory: %w", err)
	}
	if err := s.chown(s.Dir); err != nil {
		return nil, err
	}
	if err := copyTree(c.dataDir(), s.dataDir(), s.chown); err != nil {
		return nil, fmt.Errorf("copying the data directory for the standby: %w", err)
	}
	// standby.signal makes it a standby; primary_conninfo is where it
	// streams from (the primary's port is known once it has started).
	f := filepath.Join(s.dataDir(), "standby.signal")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		return nil, err
	}
	return s, s.chown(f)
}

// startStandby points the standby at the running primary, starts it on a
// free port of its own and waits until the primary streams to it.
func (c *Cluster) startStandby(ctx context.Context, s *Cluster, logf func(string, ...any)) error {
	conninfo := fmt.Sprintf("primary_conninfo = 'host=%s port=%d user=%s application_name=%s'\n", c.Host, c.Port, c.Superuser, StandbyName)
	if err := s.startOnFreePort(ctx, standbyConfig+conninfo, logf); err != nil {
		return fmt.Errorf("starting the standby: %w", err)
	}
	if s.Version, _ = s.serverVersion(); s.Version == "" {
		s.Version = c.Version
	}
	s.Phase = PhaseRunning
	conn, err := envelope.Dial(ctx, c.DSN(""), envelope.Work{})
	if err != nil {
		return fmt.Errorf("connecting to the primary: %w", err)
	}
	defer conn.Close(context.Background())
	// A bound for a stalled machine, not a measure of speed.
	for deadline := time.Now().Add(time.Minute); ; {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", StandbyName).Scan(&n); err != nil {
			return fmt.Errorf("asking the primary about its standby: %w", err)
		}
		if n > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby did not stream from the primary within a minute (standby log: %s)", lastLines(s.logFile(), 5))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// copyTree copies a directory tree with its files' modes, handing each
// file and directory made to the cluster's owner.
func copyTree(from, to string, chown func(string) error) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(dst, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, dst, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return nil // a fresh data directory has no links nor sockets
		}
		return chown(dst)
	})
}

func copyFile(from, to string, mode fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
