package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/pgmedic/pgmedic/internal/envelope"
	"github.com/pgmedic/pgmedic/internal/sqlparse"
)

// safeVolatile are functions outside pg_catalog that are VOLATILE only
// because their result changes between calls, not because they act on
// anything: random values and statistics views.
var safeVolatile = map[string]bool{
	"gen_random_uuid": true, "uuid_generate_v1": true, "uuid_generate_v1mc": true, "uuid_generate_v4": true,
	"gen_random_bytes": true, "pg_stat_statements": true, "pg_stat_statements_info": true,
}

// builtinSchemas hold PostgreSQL's own functions. Their side effects are
// known by name (sqlparse's list of functions that act outside the
// transaction); every other VOLATILE function there only reads.
var builtinSchemas = map[string]bool{"pg_catalog": true, "information_schema": true}

// maxViewDepth bounds how deep views over views are followed.
const maxViewDepth = 4

// UnsafeCallee says why executing stmt could act outside the rolled-back
// transaction, or "" when nothing it calls can. A rollback undoes writes to
// tables, but not what a user-written VOLATILE function does elsewhere:
// resetting statistics, sending mail through an extension, advancing a
// sequence, writing a file. So a statement is executed only when every
// function and operator it reaches, through the views it reads too, is
// built in and not known to act, or is declared IMMUTABLE or STABLE, or is
// named in allow (--allow-function). Names resolve the way the server
// would: qualified names in their schema, bare names along search_path.
// Every overload of a name counts, so an ambiguous call is judged by its
// most dangerous candidate.
func UnsafeCallee(ctx context.Context, q envelope.Conn, stmt *sqlparse.Statement, allow []string) (string, error) {
	return unsafeCallee(ctx, q, stmt, allowSet(allow), 0)
}

func allowSet(allow []string) map[string]bool {
	out := map[string]bool{}
	for _, a := range allow {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			out[a] = true
		}
	}
	return out
}

// unsafeCallee is UnsafeCallee at a depth of views.
func unsafeCallee(ctx context.Context, q envelope.Conn, stmt *sqlparse.Statement, allow map[string]bool, depth int) (string, error) {
	if fn := stmt.SideEffect(); fn != "" && !allow[fn] {
		return fmt.Sprintf("it calls %s(), which acts outside the transaction", fn), nil
	}
	funcs, ops := stmt.Callees()
	if len(funcs) > 0 {
		why, err := volatileFunction(ctx, q, funcs, allow)
		if err != nil || why != "" {
			return why, err
		}
	}
	if len(ops) > 0 {
		why, err := volatileOperator(ctx, q, ops, allow)
		if err != nil || why != "" {
			return why, err
		}
	}
	rels := stmt.Relations()
	if len(rels) == 0 {
		return "", nil
	}
	if depth >= maxViewDepth {
		return "", nil
	}
	schemas, names := split(rels)
	// Views outside pg_catalog are expanded by the planner into their
	// definition; what they call runs as if the statement called it.
	var defs []string
	err := q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(array_agg(pg_get_viewdef(v.oid)), '{}') FROM (
		SELECT DISTINCT c.oid FROM unnest($1::text[], $2::text[]) AS w(schema, name)
		JOIN pg_class c ON c.relname = w.name AND c.relkind = 'v'
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
		  AND (n.nspname = w.schema OR (w.schema = '' AND n.nspname = ANY (current_schemas(true))))
		LIMIT 50) v`, schemas, names).Scan(&defs)
	if err != nil {
		return "", fmt.Errorf("reading view definitions: %w", err)
	}
	for _, def := range defs {
		vs, err := sqlparse.Parse(def)
		if err != nil {
			continue // a view PostgreSQL printed always parses; be lenient
		}
		if why, err := unsafeCallee(ctx, q, vs, allow, depth+1); err != nil || why != "" {
			if why != "" {
				why += " (through a view)"
			}
			return why, err
		}
	}
	return "", nil
}

func split(names []sqlparse.Name) (schemas, bare []string) {
	for _, n := range names {
		schemas = append(schemas, n.Schema)
		bare = append(bare, n.Name)
	}
	return schemas, bare
}

// volatileFunction finds a VOLATILE candidate for any of funcs that is not
// built in, not known harmless and not allowed.
func volatileFunction(ctx context.Context, q envelope.Conn, funcs []sqlparse.Name, allow map[string]bool) (string, error) {
	schemas, names := split(funcs)
	var schema, name, sig []string
	err := q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(array_agg(nspname ORDER BY nspname, proname, sig), '{}'),
		coalesce(array_agg(proname ORDER BY nspname, proname, sig), '{}'), coalesce(array_agg(sig ORDER BY nspname, proname, sig), '{}')
		FROM (SELECT DISTINCT n.nspname::text, p.proname::text, p.oid::regprocedure::text AS sig
		FROM unnest($1::text[], $2::text[]) AS f(schema, name)
		JOIN pg_proc p ON p.proname = f.name
		JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.provolatile = 'v'
		  AND (n.nspname = f.schema OR (f.schema = '' AND n.nspname = ANY (current_schemas(true))))) x`,
		schemas, names).Scan(&schema, &name, &sig)
	if err != nil {
		return "", fmt.Errorf("looking up the functions the statement calls: %w", err)
	}
	for i := range sig {
		if builtinSchemas[schema[i]] || safeVolatile[name[i]] || allow[name[i]] || allow[schema[i]+"."+name[i]] {
			continue
		}
		return fmt.Sprintf("it calls %s.%s, declared VOLATILE, which may act outside the transaction (a rollback does not undo what it does); review it and pass --allow-function %s.%s to run it anyway",
			schema[i], sig[i], schema[i], name[i]), nil
	}
	return "", nil
}

// volatileOperator does the same for operators, which run the function
// behind them (pg_operator.oprcode).
func volatileOperator(ctx context.Context, q envelope.Conn, ops []sqlparse.Name, allow map[string]bool) (string, error) {
	schemas, names := split(ops)
	var schema, name, op, sig []string
	err := q.QueryRow(ctx, envelope.Tag+`SELECT coalesce(array_agg(nspname ORDER BY sig), '{}'), coalesce(array_agg(proname ORDER BY sig), '{}'),
		coalesce(array_agg(oprname ORDER BY sig), '{}'), coalesce(array_agg(sig ORDER BY sig), '{}')
		FROM (SELECT DISTINCT pn.nspname::text, p.proname::text, o.oprname::text, p.oid::regprocedure::text AS sig
		FROM unnest($1::text[], $2::text[]) AS f(schema, name)
		JOIN pg_operator o ON o.oprname = f.name
		JOIN pg_namespace n ON n.oid = o.oprnamespace
		JOIN pg_proc p ON p.oid = o.oprcode
		JOIN pg_namespace pn ON pn.oid = p.pronamespace
		WHERE p.provolatile = 'v'
		  AND (n.nspname = f.schema OR (f.schema = '' AND n.nspname = ANY (current_schemas(true))))) x`,
		schemas, names).Scan(&schema, &name, &op, &sig)
	if err != nil {
		return "", fmt.Errorf("looking up the operators the statement uses: %w", err)
	}
	for i := range sig {
		if builtinSchemas[schema[i]] || allow[name[i]] || allow[schema[i]+"."+name[i]] {
			continue
		}
		return fmt.Sprintf("its operator %s runs %s.%s, declared VOLATILE, which may act outside the transaction; pass --allow-function %s.%s to run it anyway",
			op[i], schema[i], sig[i], schema[i], name[i]), nil
	}
	return "", nil
}

// refusal says why the engine will not execute stmt, or "": it must be a
// plain SELECT (sqlparse) and call nothing that acts outside the
// transaction (UnsafeCallee).
func (e *Engine) refusal(ctx context.Context, stmt *sqlparse.Statement) string {
	if ok, why := stmt.SafeToAnalyze(); !ok {
		return why
	}
	why, err := UnsafeCallee(ctx, e.Conn, stmt, e.AllowFunctions)
	if err != nil {
		return "cannot check what the statement calls, so it is not executed (" + err.Error() + ")"
	}
	return why
}

// refusalOfCalls is refusal without the SELECT-only rule, for statements
// run against a temporary copy, where writes are allowed.
func (e *Engine) refusalOfCalls(ctx context.Context, stmt *sqlparse.Statement) string {
	why, err := UnsafeCallee(ctx, e.Conn, stmt, e.AllowFunctions)
	if err != nil {
		return "cannot check what the statement calls, so it is not executed (" + err.Error() + ")"
	}
	return why
}
