package rules

import (
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/model"
	"github.com/pgmedic/pgmedic/internal/printable"
)

// wraparoundLog is wraparound from a server log alone (a managed server
// whose catalogs pgmedic does not read, an incident's log afterwards).
// PostgreSQL warns only when a limit is close: 40 million transaction
// ids, 10 million MultiXactIds, or about a million member entries before
// it stops assigning them, so every warning is critical, and a refused
// command says the limit was reached.
func wraparoundLog(in LogInput) []model.Finding {
	var out []model.Finding
	for _, w := range in.Events.Wraparound {
		title := fmt.Sprintf("the server log warns %s times that %s must be vacuumed before its %s run out", printable.Count(float64(w.Warnings)), orSomeDatabase(w.Database), w.Limit)
		if w.Least >= 0 && w.Warnings > 0 {
			title += fmt.Sprintf(" (%s left at the fewest)", printable.Count(float64(w.Least)))
		}
		if w.Refusals > 0 {
			title = fmt.Sprintf("the server refused %s commands at its %s limit", printable.Count(float64(w.Refusals)), w.Limit) + "; " + title
			if w.Warnings == 0 {
				title = fmt.Sprintf("the server refused %s commands at its %s limit (%s)", printable.Count(float64(w.Refusals)), w.Limit, orSomeDatabase(w.Database))
			}
		}
		evs := []model.Evidence{ev2("warnings that a database must be vacuumed", w.Warnings), ev2("commands refused at the limit", w.Refusals)}
		if w.Least >= 0 && w.Warnings > 0 {
			evs = append(evs, ev2(w.Limit+" left at the fewest", w.Least))
		}
		out = append(out, model.Finding{Rule: WraparoundID, Severity: model.Critical, Title: title,
			Object:       logObject(in),
			Evidence:     evs,
			Impact:       model.Impact{Summary: wrapLogImpact[w.Limit]},
			Fix:          model.Fix{Summary: wrapLogFix[w.Limit]},
			Verification: loggedVerification, Docs: docsPath(WraparoundID)})
	}
	return out
}

func orSomeDatabase(db string) string {
	if db == "" {
		return "a database"
	}
	if strings.HasPrefix(db, "the ") {
		return db
	}
	return "database " + db
}

var wrapLogImpact = map[string]string{
	model.LimitXIDs:    "at the limit the server assigns no transaction id: every write fails until the database is vacuumed, the oldest tables first",
	model.LimitMultis:  "at the limit the server creates no multixact: foreign-key inserts, SELECT ... FOR SHARE and concurrent row locks fail until the database is vacuumed",
	model.LimitMembers: "at the limit the server creates no multixact: foreign-key inserts, SELECT ... FOR SHARE and concurrent row locks fail with multixact \"members\" limit exceeded until every database holding old multixacts is vacuumed",
}

var wrapLogFix = map[string]string{
	model.LimitXIDs:    "end what holds the xmin horizon back (prepared transactions, idle sessions in a transaction, unread replication slots), then VACUUM (FREEZE, VERBOSE) the oldest tables of the named database (age(relfrozenxid)), and watch pg_stat_progress_vacuum; run pgmedic check on it to name them and what holds them",
	model.LimitMultis:  "VACUUM (FREEZE, VERBOSE) the tables of the named database whose multixacts are oldest (mxid_age(relminmxid)); run pgmedic check on it to name them",
	model.LimitMembers: "VACUUM (FREEZE, VERBOSE) the tables whose multixacts are oldest (mxid_age(relminmxid)) in the named database first (from PostgreSQL 15 OID 4 is template0: autovacuum freezes it, and vacuumdb reaches it once ALLOW_CONNECTIONS lets it in), then every other database; run pgmedic check as a superuser to read the member space, the rate it fills at and the tables to freeze",
}
