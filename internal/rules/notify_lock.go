package rules

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// NotifyLockID is the stable id of the rule.
const NotifyLockID = "notify-lock"

// A transaction that has queued a NOTIFY takes, just before it commits,
// an exclusive lock on the server's one notification queue (PreCommit_Notify
// locks object 0 of pg_database, class 1262, in database 0, shared by every
// database), and keeps it until its commit is written and, with
// synchronous_commit on, flushed. Every other notifying transaction waits
// for it: commits that would share a WAL flush are taken one at a time,
// and the server does less work while more sessions wait (the load
// rises, CPU and I/O fall).
const notifyLockPrefix = "object 1262/0 of database 0 "

const (
	notifyShareWarn     = 0.1 // waits on the queue's lock as a share of active session-samples
	notifyShareCritical = 0.5
	notifyMinSamples    = 3
)

// notifyWait says b waits for the notification queue's commit lock.
func notifyWait(b model.Backend) bool {
	return b.WaitType == "Lock" && strings.HasPrefix(b.WaitsFor, notifyLockPrefix)
}

// notifyLock finds commits queued on the notification queue's lock:
// the share of the sampled active session time spent waiting for it,
// the most sessions waiting at once, and the statements that notify.
func notifyLock(s *model.Snapshot) ([]model.Finding, []model.Skip) {
	if ok, skip := sampled(s, NotifyLockID); !ok {
		return nil, skip
	}
	active, waiting, worst := 0, 0, 0
	dbs := map[string]bool{}
	var waiters []string
	for _, smp := range s.Sampling.Samples {
		n := 0
		for _, b := range smp.Backends {
			if b.State == "active" || strings.HasPrefix(b.State, "idle in transaction") {
				active++
			}
			if notifyWait(b) {
				waiting++
				n++
				dbs[b.Database] = true
				if q := printable.Shorten(s.Shown(b.Query), 80); !slices.Contains(waiters, q) && len(waiters) < 3 {
					waiters = append(waiters, q)
				}
			}
		}
		worst = max(worst, n)
	}
	share := 0.0
	if active > 0 {
		share = float64(waiting) / float64(active)
	}
	if waiting < notifyMinSamples || worst < 2 || share < notifyShareWarn {
		return nil, nil
	}
	sev := model.Warning
	if share >= notifyShareCritical {
		sev = model.Critical
	}
	notifying := notifyingStatements(s)
	channels := notifyChannels(notifying)
	f := model.Finding{
		Rule: NotifyLockID, Severity: sev,
		Title: fmt.Sprintf("commits queued on the NOTIFY queue's lock for %s of the sampled session time; at the worst moment %s waited",
			pct(share), sessionsWord(worst)),
		Object: model.Object{Kind: "database", Name: s.Database, Database: s.Database},
		Evidence: []model.Evidence{
			ev("session-samples waiting on the notification queue's lock", float64(waiting), ""),
			ev("session-samples active or in a transaction", float64(active), ""),
			ev("sessions waiting at the worst moment", float64(worst), ""),
		},
		Impact: model.Impact{Share: math.Min(share, 1),
			Summary: "every transaction that sent a NOTIFY commits one at a time, behind the lock on the server's one notification queue (" +
				strings.Join(slices.Sorted(maps.Keys(dbs)), ", ") + "); the waiting statements: " + strings.Join(waiters, "; ")},
		Fix:  notifyFix(channels),
		Docs: docsPath(NotifyLockID),
		Experiment: &model.Experiment{Kind: model.ExpNotifyCommits, Clients: max(worst+1, 4),
			AppSettings: map[string]string{"synchronous_commit": s.Settings["synchronous_commit"].Value, "fsync": s.Settings["fsync"].Value}},
	}
	if s.Statements != nil { // nil: pg_stat_statements was not read
		f.Evidence = append(f.Evidence, ev("statements that notify (pg_stat_statements)", float64(len(notifying)), ""))
	}
	for i, q := range notifying {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, model.Evidence{Label: "notifies: " + printable.Shorten(s.Shown(q), 100), Value: 1, Fact: true})
	}
	return []model.Finding{f}, nil
}

// notifyingStatements are the statements pg_stat_statements holds that
// send a notification, busiest first (as the view is ordered).
func notifyingStatements(s *model.Snapshot) []string {
	var out []string
	for _, st := range s.Statements {
		if re := notifyPatterns(); re.stmt.MatchString(st.Query) || re.call.MatchString(st.Query) {
			out = append(out, st.Query)
		}
	}
	return out
}

// notifyPatterns: NOTIFY is a statement of its own; pg_notify a call
// anywhere in one (its channel known when it is a literal). Compiled on
// first use: every pgmedic process pays for what its package variables
// build, explain of one plan included.
var notifyPatterns = sync.OnceValue(func() (p struct{ stmt, call, fn *regexp.Regexp }) {
	p.stmt = regexp.MustCompile(`(?i)^\s*notify\s+("[^"]+"|[a-z_][a-z0-9_$]*)`)
	p.call = regexp.MustCompile(`(?i)\bpg_notify\s*\(`)
	p.fn = regexp.MustCompile(`(?i)\bpg_notify\s*\(\s*'([^']+)'`)
	return p
})

// notifyChannels are the channels the statements name (a channel given
// as a parameter is not known).
func notifyChannels(stmts []string) []string {
	var out []string
	for _, q := range stmts {
		for _, re := range []*regexp.Regexp{notifyPatterns().stmt, notifyPatterns().fn} {
			for _, m := range re.FindAllStringSubmatch(q, -1) {
				if c := strings.Trim(m[1], `"`); !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// notifyFix takes NOTIFY out of the write transactions: each writes a
// row to an outbox in its transaction, and one session notifies once for
// all the rows committed since its last round, so commits no longer take
// the queue's lock one at a time.
func notifyFix(channels []string) model.Fix {
	ch := "events"
	if len(channels) > 0 {
		ch = channels[0]
	}
	return model.Fix{
		Summary: "take NOTIFY out of the write transactions: write an outbox row in the transaction instead, and let one notifier send one NOTIFY per batch of committed rows (or notify after COMMIT, outside the transaction, once per batch)",
		SQL: fmt.Sprintf(`CREATE TABLE notify_outbox (id bigserial PRIMARY KEY, channel text NOT NULL, payload text, created timestamptz NOT NULL DEFAULT now());
-- in each write transaction, instead of NOTIFY / pg_notify:
--   INSERT INTO notify_outbox (channel, payload) VALUES ('%s', $1);
-- one notifier session, every few milliseconds, in its own transaction:
WITH sent AS (DELETE FROM notify_outbox RETURNING channel)
SELECT pg_notify(channel, count(*)::text) FROM sent GROUP BY channel;`, strings.ReplaceAll(ch, "'", "''")),
	}
}
