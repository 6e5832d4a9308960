package verify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// The notify experiment: notifyTxns one-row write transactions per
// worker, each its own round trip (BEGIN; INSERT; NOTIFY; COMMIT as one
// simple-protocol string), on a scratch table of pgmedic's.
const (
	notifyTxns       = 50
	notifyMaxWorkers = 16
	notifyMinRatio   = 1.25 // commits per second without NOTIFY over with it
	notifyTable      = "pgmedic_notify_probe"
)

// notifyCommits proves a notify-lock finding where pgmedic may write (a
// twin, a lab database): as many workers as sessions were seen queued
// commit one-row transactions together, first each with a NOTIFY, then
// without it, as the outbox's writers would. The commit's WAL flush is
// what the queue's lock serialises, so each worker commits with the
// target's synchronous_commit, and a twin's fsync is set to the target's
// for the run (a lab cluster runs without it).
func (e *Engine) notifyCommits(ctx context.Context, _ *model.Snapshot, f *model.Finding) {
	exp := f.Experiment
	if e.Workers == nil {
		f.Verification = model.NotRunBecause("timing commits needs concurrent writers and pgmedic does not write to a target: check --twin runs it on a twin")
		return
	}
	n := min(max(exp.Clients, 4), notifyMaxWorkers)
	conns, closeAll, err := e.openWorkers(ctx, n)
	defer closeAll()
	if err == nil {
		err = e.notifySetup(ctx, conns, exp.AppSettings)
	}
	if err != nil {
		f.Verification = model.NotRunBecause("preparing the commits on the twin failed: " + envelope.Message(err))
		return
	}
	defer conns[0].Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+notifyTable)
	fsync, restore := e.matchFsync(ctx, conns, exp.AppSettings["fsync"])
	defer restore()
	var rate [2]float64
	for i, notify := range []bool{true, false} {
		if rate[i], err = e.commitRate(ctx, conns, notify); err != nil {
			f.Verification = model.NotRunBecause("the commits on the twin failed: " + envelope.Message(err))
			return
		}
	}
	with, without := model.Round(rate[0], 1), model.Round(rate[1], 1)
	f.Evidence = append(f.Evidence,
		model.Evidence{Label: "commits per second, each transaction with a NOTIFY", Value: with},
		model.Evidence{Label: "commits per second, the same transactions without it", Value: without})
	f.Verification = model.Verification{
		Method: fmt.Sprintf("%d sessions each committed %d one-row INSERT transactions at once, each with a NOTIFY and then without it, with synchronous_commit = %s as on the target and fsync = %s",
			n, notifyTxns, orDefault(exp.AppSettings["synchronous_commit"], "on"), fsync),
		Before: &model.Measure{Value: with, Unit: "commits/s"},
		After:  &model.Measure{Value: without, Unit: "commits/s"}}
	if with > 0 && without/with >= notifyMinRatio {
		f.Verification.Status = model.Confirmed
		return
	}
	f.Verification.Status = model.Refuted
	f.Verification.Reason = fmt.Sprintf("the commits did not queue on the notification lock here (%.1f against %.1f commits/s): the cost the sampler saw needs the target's own WAL flush time, or more writers", with, without)
	f.Severity = model.Info
}

// notifySetup makes the scratch table and sets each worker's
// synchronous_commit to the target's.
func (e *Engine) notifySetup(ctx context.Context, conns []Session, settings map[string]string) error {
	if _, err := conns[0].Exec(ctx, "CREATE TABLE IF NOT EXISTS "+notifyTable+" (id bigserial PRIMARY KEY, payload text)"); err != nil {
		return err
	}
	sc := orDefault(settings["synchronous_commit"], "on")
	for _, c := range conns {
		if _, err := c.Exec(ctx, "SET synchronous_commit = "+sqlparse.QuoteLiteral(sc)); err != nil {
			return err
		}
	}
	return nil
}

// matchFsync sets the server's fsync to the target's when they differ
// and pgmedic owns the server (a twin), and returns the fsync the run
// has ("on, as on the target", or the server's own when it could not be
// matched, which the method line then says) and what puts it back.
// pg_reload_conf() only signals the server: each session takes the new
// value at its next statement once the postmaster has passed the signal
// on, and a commit flushes WAL with its own session's fsync. So every
// worker is asked until it shows the target's value; a side timed
// before that measured the old one (a run on a busy machine timed its
// first side at 9,863 commits/s without fsync and its second at 2,376
// with it, and refuted a true finding).
func (e *Engine) matchFsync(ctx context.Context, conns []Session, want string) (string, func()) {
	c := conns[0]
	var have string
	if err := c.QueryRow(ctx, "SHOW fsync").Scan(&have); err != nil {
		return "unknown", func() {}
	}
	switch {
	case want == "" || strings.EqualFold(have, want):
		return have + ", as on the target", func() {}
	case !e.InPlace:
		return have + " (the target's is " + want + ")", func() {}
	}
	if _, err := c.Exec(ctx, "ALTER SYSTEM SET fsync = "+sqlparse.QuoteLiteral(want)); err != nil {
		return have + " (the target's is " + want + "; it could not be set: " + envelope.Message(err) + ")", func() {}
	}
	restore := func() {
		bg := context.WithoutCancel(ctx)
		c.Exec(bg, "ALTER SYSTEM RESET fsync")
		c.Exec(bg, "SELECT pg_reload_conf()")
	}
	c.Exec(ctx, "SELECT pg_reload_conf()")
	for _, w := range conns {
		if err := e.untilShown(ctx, w, "fsync", want); err != nil {
			return have + " (the target's is " + want + "; a session did not take it: " + err.Error() + ")", restore
		}
	}
	return want + ", as on the target (set for the run)", restore
}

// untilShown asks a session for a setting until it shows want, for up to
// reloadWait.
func (e *Engine) untilShown(ctx context.Context, c Session, name, want string) error {
	deadline := e.now().Add(reloadWait)
	for {
		var v string
		if err := c.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			return err
		}
		if strings.EqualFold(v, want) {
			return nil
		}
		if e.now().After(deadline) {
			return fmt.Errorf("%s was still %s after %s", name, v, reloadWait)
		}
		e.sleep(ctx, 20*time.Millisecond)
	}
}

// reloadWait bounds how long a session may take to show a reloaded
// setting.
const reloadWait = 10 * time.Second

// commitRate runs notifyTxns transactions on every worker at once and
// returns the commits per second on the engine's clock.
func (e *Engine) commitRate(ctx context.Context, conns []Session, notify bool) (float64, error) {
	txn := "BEGIN; INSERT INTO " + notifyTable + " (payload) VALUES ('pgmedic'); COMMIT"
	if notify {
		txn = "BEGIN; INSERT INTO " + notifyTable + " (payload) VALUES ('pgmedic'); NOTIFY pgmedic_probe, 'pgmedic'; COMMIT"
	}
	started := e.now()
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range notifyTxns {
				if _, err := c.Exec(ctx, txn); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	secs := max(e.now().Sub(started).Seconds(), 1e-3)
	return float64(len(conns)*notifyTxns) / secs, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
