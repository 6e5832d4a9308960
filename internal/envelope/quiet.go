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

// explainSetting carries an EXPLAIN's output, or its failure, out of the
// block that runs it quietly.
const explainSetting = "pgmedic.explain"

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
	explain = Tag + explain
	quote, ok := dollarQuote(explain)
	if !ok {
		return "", fmt.Errorf("the statement's text holds every dollar-quote tag pgmedic would wrap it in")
	}
	var b strings.Builder
	b.WriteString("DO " + quote("outer") + "DECLARE out text; st text; msg text; det text; hnt text; BEGIN ")
	b.WriteString("EXECUTE " + quote("") + " INTO out; PERFORM " + Tag + "set_config('" + explainSetting + "', 'ok:' || out, false); ")
	b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT; ")
	b.WriteString("PERFORM " + Tag + "set_config('" + explainSetting + "', concat_ws(chr(31), 'error', st, msg, coalesce(det, ''), coalesce(hnt, '')), false); ")
	b.WriteString("END" + quote("outer"))
	if _, err := q.Exec(ctx, Tag+b.String()); err != nil {
		return "", err
	}
	var outcome, cleared string
	if err := q.QueryRow(ctx, Tag+"SELECT current_setting('"+explainSetting+"'), set_config('"+explainSetting+"', '', false)").Scan(&outcome, &cleared); err != nil {
		return "", err
	}
	if out, ok := strings.CutPrefix(outcome, "ok:"); ok {
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
	return "", fmt.Errorf("EXPLAIN left no outcome (%q)", outcome)
}

// execSetting carries a quietly run statement's failure out of its block.
const execSetting = "pgmedic.exec"

// Run runs a statement pgmedic did not write (an application's SELECT, to
// time it) inside a PL/pgSQL block that traps its failure, as Explain
// does, its rows computed and dropped: a statement that fails or runs past
// pgmedic's statement_timeout leaves no ERROR in the server's log. The
// failure comes back as a *pgconn.PgError (SQLSTATE 57014 for the
// timeout).
func Run(ctx context.Context, q Conn, query string) error {
	query = Tag + query
	quote, ok := dollarQuote(query)
	if !ok {
		return fmt.Errorf("the statement's text holds every dollar-quote tag pgmedic would wrap it in")
	}
	var b strings.Builder
	b.WriteString("DO " + quote("outer") + "DECLARE st text; msg text; BEGIN ")
	b.WriteString("PERFORM " + Tag + "set_config('" + execSetting + "', 'ok', false); EXECUTE " + quote("") + "; ")
	b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT; ")
	b.WriteString("PERFORM " + Tag + "set_config('" + execSetting + "', concat_ws(chr(31), 'error', st, msg), false); ")
	b.WriteString("END" + quote("outer"))
	if _, err := q.Exec(ctx, Tag+b.String()); err != nil {
		return err
	}
	var outcome string
	if err := q.QueryRow(ctx, Tag+"SELECT current_setting('"+execSetting+"')").Scan(&outcome); err != nil {
		return err
	}
	if outcome == "ok" {
		return nil
	}
	if f := strings.Split(outcome, fieldSep); len(f) >= 3 && f[0] == "error" {
		return &pgconn.PgError{Severity: "ERROR", Code: f[1], Message: f[2]}
	}
	return fmt.Errorf("the statement left no outcome (%q)", outcome)
}

// valueSetting carries a quietly read value, or its failure, out of its
// block.
const valueSetting = "pgmedic.value"

// Value reads one value (the first column of the first row, as text) of
// a query inside a PL/pgSQL block that traps its failure, as Run does:
// a read that may run past pgmedic's statement_timeout on a busy server
// (pg_jit_available() loading the JIT provider) leaves no ERROR in the
// server's log, and its caller still gets SQLSTATE 57014.
func Value(ctx context.Context, q Conn, query string) (string, error) {
	query = Tag + query
	quote, ok := dollarQuote(query)
	if !ok {
		return "", fmt.Errorf("the query's text holds every dollar-quote tag pgmedic would wrap it in")
	}
	var b strings.Builder
	b.WriteString("DO " + quote("outer") + "DECLARE out text; st text; msg text; BEGIN ")
	b.WriteString("EXECUTE " + quote("") + " INTO out; PERFORM " + Tag + "set_config('" + valueSetting + "', 'ok:' || coalesce(out, ''), false); ")
	b.WriteString("EXCEPTION WHEN OTHERS OR query_canceled THEN GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT; ")
	b.WriteString("PERFORM " + Tag + "set_config('" + valueSetting + "', concat_ws(chr(31), 'error', st, msg), false); ")
	b.WriteString("END" + quote("outer"))
	if _, err := q.Exec(ctx, Tag+b.String()); err != nil {
		return "", err
	}
	var outcome string
	if err := q.QueryRow(ctx, Tag+"SELECT current_setting('"+valueSetting+"')").Scan(&outcome); err != nil {
		return "", err
	}
	if out, ok := strings.CutPrefix(outcome, "ok:"); ok {
		return out, nil
	}
	if f := strings.Split(outcome, fieldSep); len(f) >= 3 && f[0] == "error" {
		return "", &pgconn.PgError{Severity: "ERROR", Code: f[1], Message: f[2]}
	}
	return "", fmt.Errorf("the query left no outcome (%q)", outcome)
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
