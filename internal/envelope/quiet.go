package envelope

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgmedic prepares and explains statements it did not write (pg_stat_statements' texts,
// with bare $n where literals stood) to plan them. PostgreSQL cannot always
// infer a parameter's type ("operator is not unique: unknown + unknown"),
// and a PREPARE that fails is an ERROR line in the server's log: teams
// alert on those, and the log is evidence pgmedic reads itself. So each
// attempt runs inside a PL/pgSQL block whose exception handler traps the
// failure (a trapped error is neither logged nor returned to the client)
// and leaves its SQLSTATE and message in a setting of the session, which
// pgmedic then reads. A prepared statement outlives the block (prepared
// statements are not transactional), so a successful attempt is the
// PREPARE itself.

// prepareSetting carries the outcome out of the block: "ok", "guessed",
// or "error:SQLSTATE:message".
const prepareSetting = "pgmedic.prepare"

// quietPrepare prepares query as name: first with types (nil leaves every
// parameter to the server), then, if that fails, with each list of
// fallback types in turn. It returns whether a fallback was used, or the first
// attempt's error as PostgreSQL gave it (a *pgconn.PgError), without any
// ERROR reaching the server's log.
func quietPrepare(ctx context.Context, q Conn, name string, types []string, query string, fallback [][]string) (guessed bool, err error) {
	quote, ok := dollarQuote(query)
	if !ok {
		return false, fmt.Errorf("the statement's text holds every dollar-quote tag pgmedic would wrap it in")
	}
	body := quote("")
	attempt := func(types []string) string {
		head := Tag + "PREPARE " + name
		if types != nil {
			head += "(" + strings.Join(types, ", ") + ")"
		}
		return "EXECUTE '" + head + " AS ' || " + body + ";"
	}
	// One line, so that transcripts and the server's log show it whole.
	var b strings.Builder
	b.WriteString("DO " + quote("outer") + "BEGIN ")
	b.WriteString("BEGIN " + attempt(types) + " PERFORM " + Tag + "set_config('" + prepareSetting + "', 'ok', false); RETURN; ")
	b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN PERFORM " + Tag + "set_config('" + prepareSetting + "', 'error:' || SQLSTATE || ':' || SQLERRM, false); END; ")
	for _, f := range fallback {
		// The first attempt's error says more about the statement: a
		// failed fallback keeps it. The first fallback that prepares
		// ends the block.
		b.WriteString("BEGIN " + attempt(f) + " PERFORM " + Tag + "set_config('" + prepareSetting + "', 'guessed', false); RETURN; ")
		b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN NULL; END; ")
	}
	b.WriteString("END" + quote("outer"))
	if _, err := q.Exec(ctx, Tag+b.String()); err != nil {
		return false, err
	}
	var outcome string
	if err := q.QueryRow(ctx, Tag+"SELECT current_setting('"+prepareSetting+"')").Scan(&outcome); err != nil {
		return false, err
	}
	switch {
	case outcome == "ok":
		return false, nil
	case outcome == "guessed":
		return true, nil
	case strings.HasPrefix(outcome, "error:"):
		code, msg, _ := strings.Cut(strings.TrimPrefix(outcome, "error:"), ":")
		return false, &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg}
	}
	return false, fmt.Errorf("preparing the statement left no outcome (%q)", outcome)
}

// fieldSep separates SQLSTATE, message, detail and hint in a trapped
// failure: a control character no message holds.
const fieldSep = "\x1f"

// quietExplain runs explain (an EXPLAIN statement with FORMAT JSON, without
// the tag) inside a PL/pgSQL block that traps its failure, as
// quietPrepare does, and returns what it printed. EXPLAIN checks the
// privileges the statement needs and evaluates what ANALYZE runs, so a
// statement pgmedic's role may not read or call would otherwise be an
// ERROR in the log. A cancel is trapped too (WHEN OTHERS leaves
// query_canceled alone, so it is named): an experiment that runs past
// pgmedic's statement_timeout is an ERROR in the target's log like any
// other, and its caller gets SQLSTATE 57014 back all the same; a Ctrl-C's
// cancel ends the block just as soon, since nothing follows the trap but
// the setting. The setting is emptied as it is read, so a large plan does
// not stay in the session.
func quietExplain(ctx context.Context, q Conn, explain string) (string, error) {
	// The EXPLAIN runs nested, and pg_stat_statements records it so
	// under track = all: tagged, it is pgmedic's there too.
	return explainBlock.run(ctx, q, explain)
}

// Run runs a statement pgmedic did not write (an application's SELECT, to
// time it) inside a PL/pgSQL block that traps its failure, as Explain
// does, its rows computed and dropped: a statement that fails or runs past
// pgmedic's statement_timeout leaves no ERROR in the server's log. The
// failure comes back as a *pgconn.PgError (SQLSTATE 57014 for the
// timeout).
func Run(ctx context.Context, q Conn, query string) error {
	_, err := runBlock.run(ctx, q, query)
	return err
}

// Value reads one value (the first column of the first row, as text) of
// a query inside a PL/pgSQL block that traps its failure, as Run does:
// a read that may run past pgmedic's statement_timeout on a busy server
// (pg_jit_available() loading the JIT provider) leaves no ERROR in the
// server's log, and its caller still gets SQLSTATE 57014.
func Value(ctx context.Context, q Conn, query string) (string, error) {
	return valueBlock.run(ctx, q, query)
}

// quietBlock is one way of running a statement inside a PL/pgSQL block
// that traps its failure (a cancel included) and leaves the outcome in a
// session setting, read right after: "ok", "ok:" and the value, or the
// SQLSTATE and message (with detail and hint) separated by fieldSep.
type quietBlock struct {
	what    string // the statement, in an error that says it left no outcome
	setting string
	// value is what the block keeps of the statement's first value
	// ("" for none: the statement's rows are dropped).
	value string
	// detail keeps the failure's detail and hint too; clear empties the
	// setting as it is read (a large plan does not stay in the session).
	detail, clear bool
}

var (
	explainBlock = quietBlock{what: "EXPLAIN", setting: "pgmedic.explain", value: "out", detail: true, clear: true}
	runBlock     = quietBlock{what: "the statement", setting: "pgmedic.exec"}
	valueBlock   = quietBlock{what: "the query", setting: "pgmedic.value", value: "coalesce(out, '')"}
)

func (k quietBlock) run(ctx context.Context, q Conn, query string) (string, error) {
	query = Tag + query
	quote, ok := dollarQuote(query)
	if !ok {
		return "", fmt.Errorf("%s's text holds every dollar-quote tag pgmedic would wrap it in", k.what)
	}
	set := func(v string) string { return "PERFORM " + Tag + "set_config('" + k.setting + "', " + v + ", false); " }
	diag, fields := "st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT", "'error', st, msg"
	declare := "st text; msg text; "
	if k.detail {
		declare += "det text; hnt text; "
		diag += ", det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT"
		fields += ", coalesce(det, ''), coalesce(hnt, '')"
	}
	var b strings.Builder
	if k.value != "" {
		b.WriteString("DO " + quote("outer") + "DECLARE out text; " + declare + "BEGIN ")
		b.WriteString("EXECUTE " + quote("") + " INTO out; " + set("'ok:' || "+k.value))
	} else {
		b.WriteString("DO " + quote("outer") + "DECLARE " + declare + "BEGIN ")
		b.WriteString(set("'ok'") + "EXECUTE " + quote("") + "; ")
	}
	b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN GET STACKED DIAGNOSTICS " + diag + "; ")
	b.WriteString(set("concat_ws(chr(31), " + fields + ")"))
	b.WriteString("END" + quote("outer"))
	if _, err := q.Exec(ctx, Tag+b.String()); err != nil {
		return "", err
	}
	read := Tag + "SELECT current_setting('" + k.setting + "')"
	var outcome, cleared string
	var err error
	if k.clear {
		err = q.QueryRow(ctx, Tag+"SELECT current_setting('"+k.setting+"'), set_config('"+k.setting+"', '', false)").Scan(&outcome, &cleared)
	} else {
		err = q.QueryRow(ctx, read).Scan(&outcome)
	}
	if err != nil {
		return "", err
	}
	if outcome == "ok" && k.value == "" {
		return "", nil
	}
	if out, ok := strings.CutPrefix(outcome, "ok:"); ok && k.value != "" {
		return out, nil
	}
	if f := strings.Split(outcome, fieldSep); len(f) >= 3 && f[0] == "error" {
		e := &pgconn.PgError{Severity: "ERROR", Code: f[1], Message: f[2]}
		if len(f) > 3 {
			e.Detail = f[3]
		}
		if len(f) > 4 {
			e.Hint = f[4]
		}
		return "", e
	}
	return "", fmt.Errorf("%s left no outcome (%q)", k.what, outcome)
}

// dollarQuote returns a function that writes text between dollar quotes
// (the query, or with a suffix, the block's own quotes) with tags that
// the query does not contain; ok is false if it contains every candidate.
func dollarQuote(query string) (func(suffix string) string, bool) {
	for i := 0; i < 100; i++ {
		tag := fmt.Sprintf("pgmedic%d", i)
		if strings.Contains(query, "$"+tag) {
			continue
		}
		return func(suffix string) string {
			if suffix == "" {
				return "$" + tag + "$" + query + "$" + tag + "$"
			}
			return "$" + tag + suffix + "$"
		}, true
	}
	return nil, false
}
