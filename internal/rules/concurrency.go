package rules

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// mixStatements bounds the distinct statements a concurrency experiment
// replays: the few that made up the sampled load.
const mixStatements = 10

// concurrencyExperiment is the replay of the sampled load on a twin:
// clients sessions running the statement mix the samples showed, as the
// clients ran it (directly, or through a pool of poolNow connections)
// and through a pool of pool connections. nil when no sampled statement
// can be replayed.
func concurrencyExperiment(s *model.Snapshot, db string, clients, poolNow, pool, cores int, reconnect bool) *model.Experiment {
	mix := sampledMix(s, db)
	if len(mix) == 0 || clients < 1 {
		return nil
	}
	return &model.Experiment{Kind: model.ExpConcurrency, Mix: mix, Clients: clients, PoolNow: poolNow, Pool: pool, Cores: cores, Reconnect: reconnect,
		Table: mixTable(s, mix)}
}

// mixTable is the table of a replayed mix's first replayable statement:
// the one the experiment is reported on.
func mixTable(s *model.Snapshot, mix []string) model.RelRef {
	for _, q := range mix {
		if _, t, ok := replayable(s, q); ok {
			return t
		}
	}
	return model.RelRef{}
}

// sampledMix is what the database's active sessions were running over
// the samples, each text repeated as many times as it was seen (so a
// replay keeps the proportions), limited to the most frequent texts that
// can be replayed on a twin.
func sampledMix(s *model.Snapshot, db string) []string {
	return sessionMix(s, db, func(b model.Backend) bool { return b.State == "active" })
}

// sessionMix is sampledMix over the sessions keep selects: an idle
// session's query is the last statement it ran.
func sessionMix(s *model.Snapshot, db string, keep func(model.Backend) bool) []string {
	seen := map[string]int{}
	for _, smp := range s.Sampling.Samples {
		for _, b := range smp.Backends {
			if b.Database == db && keep(b) && b.Query != "" {
				seen[b.Query]++
			}
		}
	}
	texts := slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		return cmp.Or(cmp.Compare(seen[b], seen[a]), strings.Compare(a, b))
	})
	var mix []string
	distinct := 0
	for _, q := range texts {
		if distinct >= mixStatements {
			break
		}
		if !inMix(s, q) {
			continue
		}
		distinct++
		for range min(seen[q], 100) {
			mix = append(mix, q)
		}
	}
	return mix
}

// inMix says whether a sampled statement can be part of a replayed mix:
// a SELECT, INSERT, UPDATE or DELETE that calls nothing acting outside
// its transaction (pg_sleep aside: it stands for time spent, which is the
// point of a load) and reads only the snapshot's tables and the catalogs,
// which every twin has.
func inMix(s *model.Snapshot, q string) bool {
	st, err := sqlparse.Parse(q)
	if err != nil {
		return false
	}
	if fn := st.SideEffect(); fn != "" && !strings.HasPrefix(fn, "pg_sleep") {
		return false
	}
	if !dml(st) {
		return false
	}
	for _, rel := range st.Relations() {
		if rel.Schema == "pg_catalog" || rel.Schema == "information_schema" || strings.HasPrefix(rel.Name, "pg_") {
			continue
		}
		if s.Table(model.RelRef{Schema: rel.Schema, Name: rel.Name}) == nil {
			return false
		}
	}
	return true
}

// workingSessions is the sessions a load kept busy on average, rounded
// up: those on CPU and those active but waiting.
func workingSessions(q runQueue) int {
	return int(math.Ceil(q.onCPU + q.waiting))
}

// poolSizeExperiment replays a saturated pool's load on a twin with the
// pool as it is and sized to the server's cores. A pool already that
// large waits on its statements, not on its size: the fix is theirs.
func poolSizeExperiment(s *model.Snapshot, f *model.Finding, a *poolWindow) {
	cores := s.ServerCores
	if cores <= 0 {
		cores = 4
	}
	now, proposed := a.pool.SvActive+a.pool.SvUsed+a.pool.SvIdle, 2*cores
	clients := a.maxClients
	switch {
	case a.pool.Database != s.Database:
		f.Verification.Reason += "; the pool serves database " + a.pool.Database + ", not the one checked, so its tables are not on a twin"
	case now >= proposed:
		f.Verification.Reason += fmt.Sprintf("; the pool already has %d server connections for %d cores: the queue waits on its statements, whose own findings carry their experiments", now, cores)
	default:
		if f.Experiment = concurrencyExperiment(s, s.Database, clients, now, proposed, cores, false); f.Experiment == nil {
			f.Verification.Reason += "; none of the sampled statements can be replayed on a twin"
		}
	}
}
