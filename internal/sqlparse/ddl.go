package sqlparse

import (
	"sync"

	"github.com/pgmedic/pgmedic/internal/pgast"
)

// DDL is what a schema change does, as far as the lock it takes and the
// way to make the same change without holding that lock long depend on it.
type DDL struct {
	// Command is ALTER TABLE, CREATE INDEX, DROP INDEX, DROP TABLE,
	// REINDEX, VACUUM FULL, VACUUM, ANALYZE, CLUSTER, TRUNCATE, LOCK
	// TABLE, REFRESH MATERIALIZED VIEW, CREATE TRIGGER or DROP TRIGGER.
	Command string
	Table   Name
	// Trigger is the trigger a DROP TRIGGER drops.
	Trigger string
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
	// References is the table a foreign key points to: ADD FOREIGN KEY
	// locks it too (SHARE ROW EXCLUSIVE, as the table altered), so its
	// writers wait as well.
	References Name
}

// atKinds names the ALTER TABLE subcommands whose locks or fixes differ.
var atKinds = sync.OnceValue(func() map[pgast.AlterTableType]string {
	return map[pgast.AlterTableType]string{
		pgast.AlterTableType_AT_AddColumn:          "ADD COLUMN",
		pgast.AlterTableType_AT_DropColumn:         "DROP COLUMN",
		pgast.AlterTableType_AT_ColumnDefault:      "SET DEFAULT",
		pgast.AlterTableType_AT_SetNotNull:         "SET NOT NULL",
		pgast.AlterTableType_AT_AlterColumnType:    "ALTER COLUMN TYPE",
		pgast.AlterTableType_AT_ValidateConstraint: "VALIDATE CONSTRAINT",
		pgast.AlterTableType_AT_DropConstraint:     "DROP CONSTRAINT",
		pgast.AlterTableType_AT_SetStatistics:      "SET STATISTICS",
		pgast.AlterTableType_AT_SetOptions:         "SET COLUMN OPTIONS",
		pgast.AlterTableType_AT_ResetOptions:       "SET COLUMN OPTIONS",
		pgast.AlterTableType_AT_SetRelOptions:      "SET STORAGE PARAMETERS",
		pgast.AlterTableType_AT_ResetRelOptions:    "SET STORAGE PARAMETERS",
		pgast.AlterTableType_AT_ClusterOn:          "CLUSTER ON",
		pgast.AlterTableType_AT_EnableTrig:         "ENABLE OR DISABLE TRIGGER",
		pgast.AlterTableType_AT_DisableTrig:        "ENABLE OR DISABLE TRIGGER",
		pgast.AlterTableType_AT_AttachPartition:    "ATTACH PARTITION",
		pgast.AlterTableType_AT_DetachPartition:    "DETACH PARTITION",
	}
})

var constraintKinds = sync.OnceValue(func() map[pgast.ConstrType]string {
	return map[pgast.ConstrType]string{
		pgast.ConstrType_CONSTR_FOREIGN:   "ADD FOREIGN KEY",
		pgast.ConstrType_CONSTR_CHECK:     "ADD CHECK",
		pgast.ConstrType_CONSTR_PRIMARY:   "ADD PRIMARY KEY",
		pgast.ConstrType_CONSTR_UNIQUE:    "ADD UNIQUE",
		pgast.ConstrType_CONSTR_EXCLUSION: "ADD EXCLUDE",
	}
})

func rangeName(rv *pgast.RangeVar) Name {
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
		return alterTableDDL(n.GetAlterTableStmt())
	case n.GetIndexStmt() != nil:
		ix := n.GetIndexStmt()
		return &DDL{Command: "CREATE INDEX", Table: rangeName(ix.Relation), Concurrently: ix.Concurrent}
	case n.GetDropStmt() != nil:
		return dropDDL(n.GetDropStmt())
	case n.GetReindexStmt() != nil:
		r := n.GetReindexStmt()
		return &DDL{Command: "REINDEX", Table: rangeName(r.Relation), Concurrently: hasOption(r.Params, "concurrently")}
	case n.GetVacuumStmt() != nil:
		return vacuumDDL(n.GetVacuumStmt())
	case n.GetClusterStmt() != nil:
		return &DDL{Command: "CLUSTER", Table: rangeName(n.GetClusterStmt().Relation)}
	case n.GetTruncateStmt() != nil:
		return &DDL{Command: "TRUNCATE", Table: firstRangeVar(n.GetTruncateStmt().Relations)}
	case n.GetLockStmt() != nil:
		l := n.GetLockStmt()
		return &DDL{Command: "LOCK TABLE", LockMode: lockModes()[l.Mode], Table: firstRangeVar(l.Relations)}
	case n.GetRefreshMatViewStmt() != nil:
		r := n.GetRefreshMatViewStmt()
		return &DDL{Command: "REFRESH MATERIALIZED VIEW", Table: rangeName(r.Relation), Concurrently: r.Concurrent}
	case n.GetCreateTrigStmt() != nil:
		return &DDL{Command: "CREATE TRIGGER", Table: rangeName(n.GetCreateTrigStmt().Relation)}
	}
	return nil
}

// alterTableDDL reads ALTER TABLE's subcommands: the lock each needs, and
// the fix, depend on them.
func alterTableDDL(a *pgast.AlterTableStmt) *DDL {
	d := &DDL{Command: "ALTER TABLE", Table: rangeName(a.Relation)}
	for _, c := range a.Cmds {
		cmd := c.GetAlterTableCmd()
		if cmd == nil {
			continue
		}
		act := DDLAction{Kind: atKinds()[cmd.Subtype], Column: cmd.Name}
		switch cmd.Subtype {
		case pgast.AlterTableType_AT_AddConstraint:
			if con := cmd.GetDef().GetConstraint(); con != nil {
				act.Kind, act.NotValid = constraintKinds()[con.Contype], con.SkipValidation
				if con.Contype == pgast.ConstrType_CONSTR_FOREIGN {
					act.References = rangeName(con.Pktable)
				}
			}
		case pgast.AlterTableType_AT_AddColumn:
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
}

// dropDDL reads DROP INDEX and DROP TABLE; other DROPs take no table lock
// the application waits for.
func dropDDL(d *pgast.DropStmt) *DDL {
	out := &DDL{Concurrently: d.Concurrent}
	switch d.RemoveType {
	case pgast.ObjectType_OBJECT_INDEX:
		out.Command = "DROP INDEX"
	case pgast.ObjectType_OBJECT_TABLE:
		out.Command = "DROP TABLE"
	case pgast.ObjectType_OBJECT_TRIGGER:
		// Its name is the list's last item, after the table's.
		out.Command = "DROP TRIGGER"
		if len(d.Objects) > 0 {
			if l := d.Objects[0].GetList(); l != nil && len(l.Items) > 1 {
				out.Table = qualified(l.Items[:len(l.Items)-1])
				out.Trigger = qualified(l.Items[len(l.Items)-1:]).Name
			}
		}
		return out
	default:
		return nil
	}
	if len(d.Objects) > 0 {
		if l := d.Objects[0].GetList(); l != nil {
			out.Table = qualified(l.Items)
		}
	}
	return out
}

// vacuumDDL reads VACUUM (FULL) and ANALYZE.
func vacuumDDL(v *pgast.VacuumStmt) *DDL {
	out := &DDL{Command: "VACUUM"}
	if !v.IsVacuumcmd {
		out.Command = "ANALYZE"
	}
	if hasOption(v.Options, "full") {
		out.Command = "VACUUM FULL"
	}
	if len(v.Rels) > 0 {
		if vr := v.Rels[0].GetVacuumRelation(); vr != nil {
			out.Table = rangeName(vr.Relation)
		}
	}
	return out
}

// hasOption says whether a list of options (DefElem) names option.
func hasOption(opts []*pgast.Node, option string) bool {
	for _, p := range opts {
		if de := p.GetDefElem(); de != nil && de.Defname == option {
			return true
		}
	}
	return false
}

// firstRangeVar names the first relation of a list (TRUNCATE a, b).
func firstRangeVar(rels []*pgast.Node) Name {
	if len(rels) == 0 {
		return Name{}
	}
	return rangeName(rels[0].GetRangeVar())
}

// lockModes are LOCK TABLE's modes by PostgreSQL's number for them
// (lockdefs.h), as pg_locks spells them.
var lockModes = sync.OnceValue(func() map[int32]string {
	return map[int32]string{
		1: "AccessShareLock", 2: "RowShareLock", 3: "RowExclusiveLock", 4: "ShareUpdateExclusiveLock",
		5: "ShareLock", 6: "ShareRowExclusiveLock", 7: "ExclusiveLock", 8: "AccessExclusiveLock",
	}
})

// Undo is what takes a table back to how it was before the change, for
// the forms that add something by name: ALTER TABLE ... ADD COLUMN c
// (DROP COLUMN IF EXISTS c), ADD CONSTRAINT n (DROP CONSTRAINT IF EXISTS
// n) and CREATE INDEX n (DROP INDEX IF EXISTS n). A copy of a table taken
// after such a change went through already has what it adds, and the
// change fails there ("already exists"); undone, it can be rehearsed as
// it ran. Nil when the statement has nothing Undo can take back, or
// anything it cannot (an ALTER TABLE that also changes a column's type).
func (s *Statement) Undo() []string {
	if s == nil || s.root == nil {
		return nil
	}
	if ix := s.root.GetIndexStmt(); ix != nil {
		if ix.Idxname == "" {
			return nil
		}
		return []string{"DROP INDEX IF EXISTS " + QuoteQualified(ix.Relation.GetSchemaname(), ix.Idxname)}
	}
	a := s.root.GetAlterTableStmt()
	if a == nil || a.Relation == nil {
		return nil
	}
	table := QuoteQualified(a.Relation.Schemaname, a.Relation.Relname)
	var out []string
	for _, c := range a.Cmds {
		cmd := c.GetAlterTableCmd()
		if cmd == nil {
			return nil
		}
		switch cmd.Subtype {
		case pgast.AlterTableType_AT_AddColumn:
			col := cmd.GetDef().GetColumnDef()
			if col == nil {
				return nil
			}
			out = append(out, "ALTER TABLE "+table+" DROP COLUMN IF EXISTS "+QuoteIdent(col.Colname))
		case pgast.AlterTableType_AT_AddConstraint:
			con := cmd.GetDef().GetConstraint()
			if con == nil || con.Conname == "" {
				return nil
			}
			out = append(out, "ALTER TABLE "+table+" DROP CONSTRAINT IF EXISTS "+QuoteIdent(con.Conname))
		case pgast.AlterTableType_AT_ColumnDefault, pgast.AlterTableType_AT_SetNotNull, pgast.AlterTableType_AT_ValidateConstraint,
			pgast.AlterTableType_AT_SetStatistics:
			// Running these again is harmless: nothing to take back.
		default:
			return nil
		}
	}
	return out
}
