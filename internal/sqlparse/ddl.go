package sqlparse

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"
)

// DDL is what a schema change does, as far as the lock it takes and the
// way to make the same change without holding that lock long depend on it.
type DDL struct {
	// Command is ALTER TABLE, CREATE INDEX, DROP INDEX, DROP TABLE,
	// REINDEX, VACUUM FULL, VACUUM, ANALYZE, CLUSTER, TRUNCATE, LOCK
	// TABLE, REFRESH MATERIALIZED VIEW or CREATE TRIGGER.
	Command string
	Table   Name
	// Concurrently is CREATE/DROP INDEX, REINDEX or REFRESH ...
	// CONCURRENTLY.
	Concurrently bool
	// Actions are ALTER TABLE's subcommands, in order.
	Actions []DDLAction
	// LockMode is LOCK TABLE's mode as written ("" for the default,
	// ACCESS EXCLUSIVE).
	LockMode string
}

// DDLAction is one subcommand of ALTER TABLE.
type DDLAction struct {
	// Kind is ADD COLUMN, DROP COLUMN, SET DEFAULT, SET NOT NULL, ALTER
	// COLUMN TYPE, ADD FOREIGN KEY, ADD CHECK, ADD PRIMARY KEY, ADD UNIQUE,
	// ADD EXCLUDE, VALIDATE CONSTRAINT, DROP CONSTRAINT, SET STATISTICS,
	// SET STORAGE PARAMETERS, SET COLUMN OPTIONS, CLUSTER ON, ENABLE OR
	// DISABLE TRIGGER, ATTACH PARTITION, DETACH PARTITION or OTHER.
	Kind   string
	Column string
	// NotValid is a constraint added NOT VALID (checked later by VALIDATE
	// CONSTRAINT).
	NotValid bool
}

// atKinds names the ALTER TABLE subcommands whose locks or fixes differ.
var atKinds = map[pg_query.AlterTableType]string{
	pg_query.AlterTableType_AT_AddColumn:          "ADD COLUMN",
	pg_query.AlterTableType_AT_DropColumn:         "DROP COLUMN",
	pg_query.AlterTableType_AT_ColumnDefault:      "SET DEFAULT",
	pg_query.AlterTableType_AT_SetNotNull:         "SET NOT NULL",
	pg_query.AlterTableType_AT_AlterColumnType:    "ALTER COLUMN TYPE",
	pg_query.AlterTableType_AT_ValidateConstraint: "VALIDATE CONSTRAINT",
	pg_query.AlterTableType_AT_DropConstraint:     "DROP CONSTRAINT",
	pg_query.AlterTableType_AT_SetStatistics:      "SET STATISTICS",
	pg_query.AlterTableType_AT_SetOptions:         "SET COLUMN OPTIONS",
	pg_query.AlterTableType_AT_ResetOptions:       "SET COLUMN OPTIONS",
	pg_query.AlterTableType_AT_SetRelOptions:      "SET STORAGE PARAMETERS",
	pg_query.AlterTableType_AT_ResetRelOptions:    "SET STORAGE PARAMETERS",
	pg_query.AlterTableType_AT_ClusterOn:          "CLUSTER ON",
	pg_query.AlterTableType_AT_EnableTrig:         "ENABLE OR DISABLE TRIGGER",
	pg_query.AlterTableType_AT_DisableTrig:        "ENABLE OR DISABLE TRIGGER",
	pg_query.AlterTableType_AT_AttachPartition:    "ATTACH PARTITION",
	pg_query.AlterTableType_AT_DetachPartition:    "DETACH PARTITION",
}

var constraintKinds = map[pg_query.ConstrType]string{
	pg_query.ConstrType_CONSTR_FOREIGN:   "ADD FOREIGN KEY",
	pg_query.ConstrType_CONSTR_CHECK:     "ADD CHECK",
	pg_query.ConstrType_CONSTR_PRIMARY:   "ADD PRIMARY KEY",
	pg_query.ConstrType_CONSTR_UNIQUE:    "ADD UNIQUE",
	pg_query.ConstrType_CONSTR_EXCLUSION: "ADD EXCLUDE",
}

func rangeName(rv *pg_query.RangeVar) Name {
	if rv == nil {
		return Name{}
	}
	return Name{Schema: rv.Schemaname, Name: rv.Relname}
}

// DDL reads the statement as a schema change; nil when it is not one
// whose table lock matters to other sessions.
func (s *Statement) DDL() *DDL {
	if s == nil || s.root == nil {
		return nil
	}
	n := s.root
	switch {
	case n.GetAlterTableStmt() != nil:
		a := n.GetAlterTableStmt()
		d := &DDL{Command: "ALTER TABLE", Table: rangeName(a.Relation)}
		for _, c := range a.Cmds {
			cmd := c.GetAlterTableCmd()
			if cmd == nil {
				continue
			}
			act := DDLAction{Kind: atKinds[cmd.Subtype], Column: cmd.Name}
			if cmd.Subtype == pg_query.AlterTableType_AT_AddConstraint {
				if con := cmd.GetDef().GetConstraint(); con != nil {
					act.Kind, act.NotValid = constraintKinds[con.Contype], con.SkipValidation
				}
			}
			if cmd.Subtype == pg_query.AlterTableType_AT_AddColumn {
				if col := cmd.GetDef().GetColumnDef(); col != nil {
					act.Column = col.Colname
				}
			}
			if act.Kind == "" {
				act.Kind = "OTHER"
			}
			d.Actions = append(d.Actions, act)
		}
		return d
	case n.GetIndexStmt() != nil:
		ix := n.GetIndexStmt()
		return &DDL{Command: "CREATE INDEX", Table: rangeName(ix.Relation), Concurrently: ix.Concurrent}
	case n.GetDropStmt() != nil:
		d := n.GetDropStmt()
		out := &DDL{Concurrently: d.Concurrent}
		switch d.RemoveType {
		case pg_query.ObjectType_OBJECT_INDEX:
			out.Command = "DROP INDEX"
		case pg_query.ObjectType_OBJECT_TABLE:
			out.Command = "DROP TABLE"
		default:
			return nil
		}
		if len(d.Objects) > 0 {
			if l := d.Objects[0].GetList(); l != nil {
				out.Table = qualified(l.Items)
			}
		}
		return out
	case n.GetReindexStmt() != nil:
		r := n.GetReindexStmt()
		out := &DDL{Command: "REINDEX", Table: rangeName(r.Relation)}
		for _, p := range r.Params {
			if de := p.GetDefElem(); de != nil && de.Defname == "concurrently" {
				out.Concurrently = true
			}
		}
		return out
	case n.GetVacuumStmt() != nil:
		v := n.GetVacuumStmt()
		out := &DDL{Command: "VACUUM"}
		if !v.IsVacuumcmd {
			out.Command = "ANALYZE"
		}
		for _, p := range v.Options {
			if de := p.GetDefElem(); de != nil && de.Defname == "full" {
				out.Command = "VACUUM FULL"
			}
		}
		if len(v.Rels) > 0 {
			if vr := v.Rels[0].GetVacuumRelation(); vr != nil {
				out.Table = rangeName(vr.Relation)
			}
		}
		return out
	case n.GetClusterStmt() != nil:
		return &DDL{Command: "CLUSTER", Table: rangeName(n.GetClusterStmt().Relation)}
	case n.GetTruncateStmt() != nil:
		t := n.GetTruncateStmt()
		out := &DDL{Command: "TRUNCATE"}
		if len(t.Relations) > 0 {
			out.Table = rangeName(t.Relations[0].GetRangeVar())
		}
		return out
	case n.GetLockStmt() != nil:
		l := n.GetLockStmt()
		out := &DDL{Command: "LOCK TABLE", LockMode: lockModes[l.Mode]}
		if len(l.Relations) > 0 {
			out.Table = rangeName(l.Relations[0].GetRangeVar())
		}
		return out
	case n.GetRefreshMatViewStmt() != nil:
		r := n.GetRefreshMatViewStmt()
		return &DDL{Command: "REFRESH MATERIALIZED VIEW", Table: rangeName(r.Relation), Concurrently: r.Concurrent}
	case n.GetCreateTrigStmt() != nil:
		return &DDL{Command: "CREATE TRIGGER", Table: rangeName(n.GetCreateTrigStmt().Relation)}
	}
	return nil
}

// lockModes are LOCK TABLE's modes by PostgreSQL's number for them
// (lockdefs.h), as pg_locks spells them.
var lockModes = map[int32]string{
	1: "AccessShareLock", 2: "RowShareLock", 3: "RowExclusiveLock", 4: "ShareUpdateExclusiveLock",
	5: "ShareLock", 6: "ShareRowExclusiveLock", 7: "ExclusiveLock", 8: "AccessExclusiveLock",
}
